"""Fresh Postgres databases for tests, on the machine's server.

``make_postgres_url()`` (a session-scoped factory fixture) creates a brand-new empty
database and returns its ``postgresql://`` URL: for tests of what happens to an
unmigrated database (migrations, ``db upgrade``, a schema of one's own).
``make_migrated_postgres_url()`` returns a new database already at the head revision,
copied from one template the session migrates once: a copy costs a tenth of running
the migrations. ``emptied(url)`` empties a migrated database's tables, for a module
that shares one database between its tests. Every database the session made, the
template included, is dropped when the session ends, however its tests went.
Databases are made by ``testkit.services`` (the one place for throwaway services), whose
``POSTGRES_ADMIN_URL`` names the server.

Here too asyncpg is imported only when used, so an install without the postgres
extra can still collect the tests.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar
from urllib.parse import urlsplit

import pytest

from testkit.services import (
    POSTGRES_ADMIN_URL,
    create_database,
    database_url,
    drop_databases,
    execute,
    fetch,
    free_port,
    run_async,
)

T = TypeVar("T")


class PostgresDatabases:
    """The databases one test session makes: empty ones and copies of a migrated one."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self._template: str | None = None

    def empty(self) -> str:
        """A new empty database's URL."""
        name = create_database()
        self.created.append(name)
        return database_url(name)

    def migrated(self) -> str:
        """A new database at the head revision: a copy of the session's template."""
        if self._template is None:
            self._template = self._migrated_template()
        name = create_database(template=self._template)
        self.created.append(name)
        return database_url(name)

    def _migrated_template(self) -> str:
        from bridge_store.backend.plugins import get_plugin_manager, open_backend

        name = create_database("template")
        self.created.append(name)

        async def migrate() -> None:
            # The SQL backend's own start-up upgrade: the template is at the head of the
            # scripts this checkout holds, as a server starting on it would leave it.
            backend = open_backend(get_plugin_manager(), database_url(name))
            await backend.start(migrate=True)
            await backend.close()  # a template is copied only with nobody connected

        run_async(migrate)
        # No test can connect to it by mistake and make the next copy fail.
        execute(POSTGRES_ADMIN_URL, f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        return name

    def drop_all(self) -> None:
        drop_databases(self.created)
        self.created.clear()


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture(scope="session")
def make_postgres_url(postgres_databases: PostgresDatabases) -> Callable[[], str]:
    """A factory: each call creates a fresh empty database and returns its URL."""
    return postgres_databases.empty


@pytest.fixture(scope="session")
def make_migrated_postgres_url(postgres_databases: PostgresDatabases) -> Callable[[], str]:
    """A factory: each call creates a fresh database at the head revision; its URL."""
    return postgres_databases.migrated


def emptied(url: str) -> str:
    """``url``, the migrated database, with every table of its schema emptied."""
    from bridge_store_sql.tables import VERSION_TABLE

    tables = [
        row[0]
        for row in fetch(
            url,
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> $1",
            VERSION_TABLE,
        )
    ]
    if tables:
        execute(url, f"TRUNCATE {', '.join(tables)}")
    return url


def terminate_connections(url: str) -> int:
    """Kill every other server connection to ``url``'s database; how many were killed.

    Returns once those server processes are gone, so their sockets are closed.
    """
    import asyncpg  # type: ignore[import-untyped]

    async def work() -> int:
        connection = await asyncpg.connect(url)
        try:
            pids = await connection.fetch(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            for row in pids:
                await connection.execute("SELECT pg_terminate_backend($1)", row["pid"])
            for _ in range(200):
                alive = await connection.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])",
                    [row["pid"] for row in pids],
                )
                if alive == 0:
                    break
                await asyncio.sleep(0.05)
            return len(pids)
        finally:
            await connection.close()

    return run_async(work)


class TcpProxy:
    """A loopback TCP forwarder to the test server that can be taken down and back.

    Stands in for the database going away: :meth:`stop` closes the listening socket
    and cuts every open connection, as a stopped server or a network failure would,
    without touching the real server other tests use. :meth:`start` listens again on
    the same port. Runs its own event loop in a thread, so it serves sync tests,
    async tests and server subprocesses alike.
    """

    def __init__(self) -> None:
        target = urlsplit(POSTGRES_ADMIN_URL)
        self._target = (target.hostname or "127.0.0.1", target.port or 5432)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def url(self, database_name: str) -> str:
        parts = urlsplit(POSTGRES_ADMIN_URL)
        user = parts.username or "postgres"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database_name}"

    def _call(self, factory: Callable[[], Awaitable[T]]) -> T:
        async def main() -> T:
            return await factory()

        return asyncio.run_coroutine_threadsafe(main(), self._loop).result(timeout=30)

    def start(self) -> None:
        async def listen() -> None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

        self._call(listen)

    def stop(self) -> None:
        async def shut() -> None:
            if self._server is not None:
                self._server.close()
                self._server = None
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()

        self._call(shut)

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, upstream_writer))
        await asyncio.gather(
            self._pipe(reader, upstream_writer),
            self._pipe(upstream_reader, writer),
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()
            self._writers.discard(writer)
