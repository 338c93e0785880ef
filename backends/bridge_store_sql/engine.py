"""Connections, transactions and retries: the one place that differs by dialect.

The substores describe their work as a coroutine over an ``AsyncConnection`` and pick
how it runs:

- :meth:`Database.read` - one statement (a consistent snapshot by itself), without
  BEGIN/COMMIT round trips; retried once on a connection that turns out to be dead.
- :meth:`Database.write` - on Postgres a single self-contained statement in autocommit
  (one round trip); ``atomic=True`` wraps several statements in a transaction. On
  SQLite every write is a ``BEGIN IMMEDIATE`` transaction, serialized in-process by an
  asyncio lock and across processes by SQLite's own lock and ``busy_timeout``, so
  "database is locked" only ever means a writer held the lock past the timeout.

Failures leave as :class:`~bridge_store.errors.ConnectError` (see :mod:`.faults`).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import importlib.util
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from bridge_store.errors import ConfigurationError
from bridge_store.urls import redact

from . import faults
from .settings import PostgresSettings, SqliteSettings

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]

#: Key of the Postgres advisory lock that serializes schema upgrades: the first 8 bytes
#: of sha1("bridge-store migrations") as a signed bigint, unlikely to collide with the
#: keys of another application sharing the database.
MIGRATION_LOCK_KEY = -6994241787615015080


class Database(abc.ABC):
    """An async engine (or two) and the rules for running work on it."""

    dialect: Literal["sqlite", "postgresql"]

    def __init__(self, description: str) -> None:
        self.description = description

    @property
    @abc.abstractmethod
    def engine(self) -> AsyncEngine:
        """The engine writes and migrations go through (once started)."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Create the engines (connections are made on first use)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every pooled connection."""

    @abc.abstractmethod
    def _read_connection(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A connection for one read statement."""

    @abc.abstractmethod
    def _write_connection(
        self, *, atomic: bool
    ) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A connection for a write; in a transaction when ``atomic``."""

    @abc.abstractmethod
    def _migration_connection(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A transaction no other process can be migrating in at the same time."""

    async def read(self, work: Work[T], *, what: str) -> T:
        return await self._run(work, self._read_connection, retry=True, what=what)

    async def write(self, work: Work[T], *, what: str, atomic: bool, retry: bool) -> T:
        """Run ``work`` as one write.

        ``retry``: the work may run twice with the same result as once (an update, a
        delete, an append carrying an idempotency key), so a connection found dead
        mid-call is replaced and the work repeated instead of failing the call.
        """

        def connection() -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
            return self._write_connection(atomic=atomic)

        return await self._run(work, connection, retry=retry, what=what)

    async def migrate(self, work: Work[T], *, what: str) -> T:
        """Run schema work with every other migrating process locked out."""
        return await self._run(work, self._migration_connection, retry=False, what=what)

    async def _run(
        self,
        work: Work[T],
        connection: Callable[[], contextlib.AbstractAsyncContextManager[AsyncConnection]],
        *,
        retry: bool,
        what: str,
    ) -> T:
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                async with connection() as conn:
                    return await work(conn)
            except Exception as error:
                if attempt < attempts and faults.is_disconnect(error):
                    continue
                translated = faults.translate(error, what)
                if translated is None:
                    raise
                raise translated from error
        raise AssertionError("unreachable: the last attempt returns or raises")


# -- SQLite ----------------------------------------------------------------------------


def _enable_wal(cursor: Any, busy_timeout_ms: int) -> None:
    """Switch the file to WAL, waiting up to the busy timeout for other connections.

    The switch needs an exclusive lock, and while another connection holds any lock
    on a rollback-journal file (one another tool created, or a new file several
    processes open at once) SQLite answers "database is locked" at once, without
    calling the busy handler. So the wait is done here. This runs in the driver's
    worker thread, never on the event loop.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as error:
            if "database is locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


class SqliteDatabase(Database):
    dialect: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, settings: SqliteSettings) -> None:
        super().__init__(f"sqlite:///{settings.path}")
        self.settings = settings
        self._writer_lock = asyncio.Lock()
        self._write_engine: AsyncEngine | None = None
        self._read_engine: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        """The engine writes (and migrations) go through."""
        if self._write_engine is None:
            raise RuntimeError("the database is not started")
        return self._write_engine

    def _configure(self, engine: AsyncEngine, *, writer: bool) -> None:
        busy_timeout = self.settings.busy_timeout_ms

        @sa.event.listens_for(engine.sync_engine, "connect")
        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Driver autocommit: the driver must not open transactions behind our
            # back; writes BEGIN IMMEDIATE themselves (below), reads need none.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout}")
            _enable_wal(cursor, busy_timeout)
            # In WAL mode NORMAL survives a crash of the process; a power loss may roll
            # back the last commits. FULL would fsync on every append.
            cursor.execute("PRAGMA synchronous = NORMAL")
            if not writer:
                cursor.execute("PRAGMA query_only = 1")
            cursor.close()

        if writer:

            @sa.event.listens_for(engine.sync_engine, "begin")
            def on_begin(conn: sa.Connection) -> None:
                # Take the write lock up front: a deferred transaction that reads and
                # then writes can fail with SQLITE_BUSY without waiting at all.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

    async def start(self) -> None:
        path = self.settings.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigurationError(
                f"cannot create the directory of {path}: {error.strerror}"
            ) from None
        url = sa.URL.create("sqlite+aiosqlite", database=str(path))
        # One writer connection: the writer lock already serializes writes in-process.
        self._write_engine = create_async_engine(url, pool_size=1, max_overflow=0)
        self._read_engine = create_async_engine(
            url, pool_size=self.settings.read_pool_size, max_overflow=0
        )
        self._configure(self._write_engine, writer=True)
        self._configure(self._read_engine, writer=False)

    async def close(self) -> None:
        for engine in (self._read_engine, self._write_engine):
            if engine is not None:
                await engine.dispose()
        self._read_engine = self._write_engine = None

    @contextlib.asynccontextmanager
    async def _read_connection(self) -> AsyncIterator[AsyncConnection]:
        if self._read_engine is None:
            raise RuntimeError("the database is not started")
        async with self._read_engine.connect() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _write_connection(self, *, atomic: bool) -> AsyncIterator[AsyncConnection]:
        async with self._writer_lock, self.engine.begin() as conn:
            yield conn

    def _migration_connection(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        # BEGIN IMMEDIATE already keeps other processes' upgrades out until commit.
        return self._write_connection(atomic=True)


# -- Postgres --------------------------------------------------------------------------


_MISSING_ASYNCPG = (
    "postgresql:// stores need the asyncpg driver: pip install 'bridge-store[postgres]'"
)


def _import_asyncpg() -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped]  # optional extra, imported late
    except ImportError:
        raise ConfigurationError(_MISSING_ASYNCPG) from None
    return asyncpg


class PostgresDatabase(Database):
    dialect: Literal["sqlite", "postgresql"] = "postgresql"

    def __init__(self, settings: PostgresSettings) -> None:
        # Checked when the URL is opened, so a missing extra fails before serving starts.
        if importlib.util.find_spec("asyncpg") is None:
            raise ConfigurationError(_MISSING_ASYNCPG)
        super().__init__(redact(settings.dsn))
        self.settings = settings
        self._engine: AsyncEngine | None = None
        self._autocommit: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("the database is not started")
        return self._engine

    async def start(self) -> None:
        asyncpg = _import_asyncpg()
        settings = self.settings

        async def connect() -> Any:
            # asyncpg parses the DSN like libpq does: TLS parameters (sslmode,
            # sslrootcert...) and server settings reach it unchanged.
            return await asyncpg.connect(
                settings.dsn,
                timeout=settings.connect_timeout,
                command_timeout=settings.command_timeout,
            )

        engine = create_async_engine(
            "postgresql+asyncpg://",
            async_creator=connect,
            pool_size=settings.pool_size,
            max_overflow=settings.max_overflow,
            pool_timeout=settings.pool_timeout,
            pool_recycle=settings.pool_recycle,
            pool_pre_ping=settings.pool_pre_ping,
        )

        @sa.event.listens_for(engine.sync_engine, "checkout")
        def drop_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
            # A connection the server (or a pooler) closed while it sat in the pool is
            # already known to be closed locally; raising here makes the pool replace
            # it before anything is sent, without a pre-ping round trip.
            if dbapi_connection.driver_connection.is_closed():
                raise sa.exc.DisconnectionError("connection closed while idle")

        self._engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = self._autocommit = None

    @contextlib.asynccontextmanager
    async def _read_connection(self) -> AsyncIterator[AsyncConnection]:
        if self._autocommit is None:
            raise RuntimeError("the database is not started")
        async with self._autocommit.connect() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _write_connection(self, *, atomic: bool) -> AsyncIterator[AsyncConnection]:
        if not atomic:
            async with self._read_connection() as conn:
                yield conn
            return
        async with self.engine.begin() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _migration_connection(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.begin() as conn:
            # Released at commit; a second server starting against the same empty
            # database waits here, then finds the schema at head.
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
            yield conn
