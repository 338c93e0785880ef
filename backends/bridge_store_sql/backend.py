"""The SQL backend: every substore in one SQLite file or one Postgres database."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy.exc as sa_exc

from bridge_store.backend.features import QueuedRun
from bridge_store.backend.substores import PoolStats
from bridge_store.errors import ConfigurationError, ConnectError

from . import errors
from . import migrate as migrate_module
from .agents import SqlAgents
from .checkpoints import SqlCheckpoints
from .engine import Database
from .export_queue import SqlExportQueue
from .history import HistoryRuns
from .leases import SqlLeases
from .search import SearchableRunEvents, has_index

logger = logging.getLogger(__name__)


class SqlBackend:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.agents = SqlAgents(db)
        # The runs, with the history's run list across agents (history.py).
        self.runs = HistoryRuns(db)
        # The run events, with the viewer's full-text index lookups (search.py).
        self.run_events = SearchableRunEvents(db)
        self.checkpoints = SqlCheckpoints(db)
        self._head: str | None = None
        self._leases = SqlLeases(db)
        self._export_queue = SqlExportQueue(db)

    async def start(self, *, migrate: bool) -> None:
        """Create the engines and check the database answers; upgrade when ``migrate``.

        An unreachable database stops the start (a ConfigurationError naming it) rather
        than the first request. Without ``migrate`` an older schema is only logged: the
        ``db upgrade`` command starts the backend that way to upgrade it.
        """
        if not migrate:
            # A read (agents, transcript, export, copy --from...) never creates a store.
            self.db.require_existing()
        await self.db.start()
        try:
            if migrate:
                await self.upgrade_schema()
                self.run_events.index_ready = True
                return
            current, head = await self.schema_revision(), migrate_module.head_revision()
            self.run_events.index_ready = has_index(current)
            if current != head:
                logger.warning(
                    "%s is at schema revision %s, not %s: calls will fail until it is "
                    "upgraded (`bridge-store db upgrade`)",
                    self.db.description,
                    current or "(none)",
                    head,
                )
        except (ConnectError, sa_exc.DBAPIError) as error:
            # Unreachable, refused at connect (a password, a missing database), or a
            # file SQLite cannot write: a start-up problem, said in one line with the fix.
            await self.db.close()
            raise errors.startup_error(self.db.description, error) from error
        except BaseException:
            await self.db.close()
            raise

    async def close(self) -> None:
        await self._leases.close()
        await self.db.close()

    async def upgrade_schema(self) -> None:
        try:
            await self.db.migrate(migrate_module.upgrade, what="schema upgrade")
        except ConfigurationError as error:
            raise ConfigurationError(f"{self.db.description}: {error}") from None

    async def schema_revision(self) -> str | None:
        return await self.db.inspect(migrate_module.current_revision, what="schema revision")

    async def readiness(self) -> str | None:
        """One read of the schema revision: the database answers, at the latest schema."""
        current = await self.schema_revision()
        if self._head is None:  # read from the migration scripts once, not every probe
            self._head = migrate_module.head_revision()
        head = self._head
        if current != head:
            return (
                f"schema at revision {current or '(none)'}, not {head}: "
                f"run `bridge-store db upgrade`"
            )
        return None

    def pool_stats(self) -> PoolStats | None:
        return self.db.pool_stats()

    async def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        """An advisory lock on Postgres, a ``flock`` beside the file on SQLite (leases.py)."""
        return await self._leases.acquire(name, holder, seconds)

    async def release_lease(self, name: str, holder: str) -> None:
        await self._leases.release(name, holder)

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        """One row per run in ``run_export_queue`` (export_queue.py)."""
        await self._export_queue.queue_runs(runs)

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        return await self._export_queue.queued_runs(limit)

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        await self._export_queue.unqueue_runs(runs)

    async def queued_count(self) -> int:
        return await self._export_queue.queued_count()
