"""The SQL backend: every substore in one SQLite file or one Postgres database."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from bridge_store.errors import ConfigurationError, ConnectError

from . import migrate
from .agents import SqlAgents
from .checkpoints import SqlCheckpoints
from .engine import Database
from .events import SqlRunEvents
from .runs import SqlRuns


class SqlBackend:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.agents = SqlAgents(db)
        self.runs = SqlRuns(db)
        self.run_events = SqlRunEvents(db)
        self.checkpoints = SqlCheckpoints(db)

    async def start(self, *, migrate: bool) -> None:
        """Create the engines, then upgrade the schema or check that it is current.

        Serving a schema older than the code would fail on every call, so without
        ``migrate`` a stale database stops the start with the command that fixes it.
        """
        await self.db.start()
        try:
            if migrate:
                await self.upgrade_schema()
                return
            current, head = await self.schema_revision(), _head()
            if current != head:
                raise ConfigurationError(
                    f"the database at {self.db.description} is at schema revision "
                    f"{current or 'none'}, this bridge-store needs {head}: run "
                    "`bridge-store db upgrade`, or serve without --no-migrate"
                )
        except ConnectError as error:
            await self.db.close()
            raise ConfigurationError(
                f"cannot start the store at {self.db.description}: {error.message}"
            ) from error
        except BaseException:
            await self.db.close()
            raise

    async def close(self) -> None:
        await self.db.close()

    async def upgrade_schema(self) -> None:
        async def work(conn: AsyncConnection) -> None:
            await conn.run_sync(migrate.upgrade)

        await self.db.migrate(work, what="schema upgrade")

    async def schema_revision(self) -> str | None:
        async def work(conn: AsyncConnection) -> str | None:
            return await conn.run_sync(migrate.current_revision)

        return await self.db.read(work, what="schema revision")


def _head() -> str:
    return migrate.head_revision()
