"""Connections, transactions and retries: the one place that differs by dialect.

The substores describe their work as a plain function over a SQLAlchemy
``Connection`` and pick how it runs:

- :meth:`Database.read` - one statement (a consistent snapshot by itself), without
  BEGIN/COMMIT round trips; retried once on a connection that turns out to be dead.
- :meth:`Database.write` - on Postgres a single self-contained statement in autocommit
  (one round trip); ``atomic=True`` wraps several statements in a transaction. On
  SQLite every write is a ``BEGIN IMMEDIATE`` transaction on the one writer thread,
  serialized across processes by SQLite's own lock and ``busy_timeout``, so
  "database is locked" only ever means a writer held the lock past the timeout.

How the work reaches the database differs: on Postgres it runs on the event loop
through SQLAlchemy's ``run_sync`` (each statement awaits asyncpg); on SQLite, whose
calls block, the whole unit of work runs in one hop to a worker thread. Going through
aiosqlite instead cost a thread hop per statement, BEGIN and COMMIT included: nine per
append, 2.6 ms of CPU in all, against about 0.3 ms now (bench/sql_append.py).

Failures leave as :class:`~bridge_store.errors.ConnectError` (see :mod:`.errors`).
"""

from __future__ import annotations

import abc
import asyncio
import functools
import importlib.util
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
import sqlalchemy.ext.asyncio
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool
from sqlalchemy.util import greenlet_spawn

from bridge_store.errors import ConfigurationError, unavailable
from bridge_store.substores import BackendOptions, PoolStats
from bridge_store.urls import redact

from . import connections, errors
from .settings import PostgresSettings, SqliteSettings
from .sqlite_threads import BatchingThreads, ClosedError, run_reads, run_writes

T = TypeVar("T")
#: A unit of database work: statements over one connection, returning their result.
Work = Callable[[sa.Connection], T]

#: Key of the Postgres advisory lock that serializes schema upgrades: the first 8 bytes
#: of sha1("bridge-store migrations") as a signed bigint, unlikely to collide with the
#: keys of another application sharing the database.
MIGRATION_LOCK_KEY = -6994241787615015080


class Database(abc.ABC):
    """The engines and the rules for running work on them."""

    dialect: Literal["sqlite", "postgresql"]

    def __init__(self, description: str) -> None:
        self.description = description

    @abc.abstractmethod
    async def start(self) -> None:
        """Create the engines (connections are made on first use)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every pooled connection."""

    @abc.abstractmethod
    async def read(self, work: Work[T], *, what: str) -> T:
        """Run ``work``, one read statement, outside any transaction."""

    @abc.abstractmethod
    async def write(self, work: Work[T], *, what: str, atomic: bool, retry: bool) -> T:
        """Run ``work`` as one write.

        ``retry``: the work may run twice with the same result as once (an update, a
        delete, an append carrying an idempotency key), so a connection found dead
        mid-call is replaced and the work repeated instead of failing the call.
        """

    @abc.abstractmethod
    async def migrate(self, work: Work[T], *, what: str) -> T:
        """Run schema work with every other migrating process locked out."""

    @abc.abstractmethod
    def pool_stats(self) -> PoolStats | None:
        """The connection pools now (None before start)."""


# -- SQLite ----------------------------------------------------------------------------


class SqliteDatabase(Database):
    """One SQLite file: a writer thread and a pool of reader threads.

    sqlite3 calls block, so they never run on the event loop; work goes to threads in
    batches (:mod:`.sqlite_threads`). The single writer thread also serializes this
    process's writes, which SQLite would serialize anyway; other processes queue on
    the file lock.
    """

    dialect: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, settings: SqliteSettings) -> None:
        super().__init__(f"sqlite:///{settings.path}")
        self.settings = settings
        self._write_engine: sa.Engine | None = None
        self._read_engine: sa.Engine | None = None
        self._writer: BatchingThreads | None = None
        self._readers: BatchingThreads | None = None

    def _configure(self, engine: sa.Engine, *, writer: bool) -> None:
        busy_timeout = self.settings.busy_timeout_ms

        @sa.event.listens_for(engine, "connect")
        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Driver autocommit: the driver must not open transactions behind our
            # back; writes BEGIN IMMEDIATE themselves (below), reads need none.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout}")
            connections.enable_wal(cursor, busy_timeout)
            # In WAL mode NORMAL survives a crash of the process; a power loss may roll
            # back the last commits. FULL would fsync on every append.
            cursor.execute("PRAGMA synchronous = NORMAL")
            if not writer:
                cursor.execute("PRAGMA query_only = 1")
            cursor.close()

        if writer:

            @sa.event.listens_for(engine, "begin")
            def on_begin(conn: sa.Connection) -> None:
                # Take the write lock up front: a deferred transaction that reads and
                # then writes can fail with SQLITE_BUSY without waiting at all.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

    async def start(self) -> None:
        path = self.settings.path
        connections.prepare_sqlite_file(path)
        url = sa.URL.create("sqlite+pysqlite", database=str(path))
        # hide_parameters: SQLAlchemy puts a failed statement's parameters (whole
        # documents, encryption keys included) into the exception's message, and logs
        # them with the statement at INFO; both show "[SQL parameters hidden ...]".
        # Pooled connections move between the pool's threads, never used by two at once.
        # No reset on return: writes commit or roll back themselves and reads run
        # outside transactions, so the pool's ROLLBACK would only cost a statement.
        options: dict[str, Any] = {
            "hide_parameters": True,
            "max_overflow": 0,
            "pool_reset_on_return": None,
            "connect_args": {"check_same_thread": False},
        }
        readers = self.settings.read_pool_size
        write_engine = sa.create_engine(url, pool_size=1, **options)
        read_engine = sa.create_engine(url, pool_size=readers, **options)
        self._configure(write_engine, writer=True)
        self._configure(read_engine, writer=False)
        self._write_engine, self._read_engine = write_engine, read_engine
        self._writer = BatchingThreads(
            "bridge-store-sqlite-writer", 1, functools.partial(run_writes, write_engine)
        )
        self._readers = BatchingThreads(
            "bridge-store-sqlite-reader", readers, functools.partial(run_reads, read_engine)
        )

    async def close(self) -> None:
        engines = [e for e in (self._read_engine, self._write_engine) if e is not None]
        workers = [w for w in (self._readers, self._writer) if w is not None]
        self._read_engine = self._write_engine = None
        self._readers = self._writer = None

        # Work already submitted finishes first: a write in flight commits or rolls
        # back, it is never cut off.
        for worker in workers:
            await worker.close()

        def dispose() -> None:
            for engine in engines:
                engine.dispose()

        await asyncio.to_thread(dispose)

    async def read(self, work: Work[T], *, what: str) -> T:
        return await self._submit(self._readers, work, what)

    def pool_stats(self) -> PoolStats | None:
        engines = [e for e in (self._write_engine, self._read_engine) if e is not None]
        if not engines:
            return None
        # Each worker thread holds one connection while it works; calls never wait in
        # the pool but queue at the threads (sqlite_threads), so waits are not counted.
        pools = [engine.pool for engine in engines if isinstance(engine.pool, QueuePool)]
        return PoolStats(
            size=sum(pool.size() for pool in pools),
            in_use=sum(pool.checkedout() for pool in pools),
        )

    async def write(self, work: Work[T], *, what: str, atomic: bool, retry: bool) -> T:
        # Every SQLite write is a transaction (BEGIN IMMEDIATE), atomic or not; a local
        # file has no dead connections to retry.
        return await self._submit(self._writer, work, what)

    async def migrate(self, work: Work[T], *, what: str) -> T:
        # BEGIN IMMEDIATE already keeps other processes' upgrades out until commit.
        return await self._submit(self._writer, work, what, batchable=False)

    @staticmethod
    async def _submit(
        worker: BatchingThreads | None, work: Work[T], what: str, *, batchable: bool = True
    ) -> T:
        if worker is None:
            raise RuntimeError("the database is not started")
        try:
            return await worker.submit(work, batchable=batchable)
        except ClosedError:
            raise unavailable(f"{what}: the store is closing") from None
        except Exception as error:
            errors.reraise(error, what)


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

    def __init__(self, settings: PostgresSettings, options: BackendOptions | None = None) -> None:
        # Checked when the URL is opened, so a missing extra fails before serving starts.
        if importlib.util.find_spec("asyncpg") is None:
            raise ConfigurationError(_MISSING_ASYNCPG)
        super().__init__(redact(settings.dsn))
        self.settings = settings
        self._keepalive = (options or BackendOptions()).tcp_keepalive()
        self._engine: AsyncEngine | None = None
        self._autocommit: AsyncEngine | None = None
        self._pool: QueuePool | None = None
        #: Units of work that found every pooled connection checked out (see _run).
        self._pool_waits = 0

    @property
    def engine(self) -> AsyncEngine:
        """The engine migrations and atomic writes go through (once started)."""
        if self._engine is None:
            raise RuntimeError("the database is not started")
        return self._engine

    async def read(self, work: Work[T], *, what: str) -> T:
        def unit() -> T:
            with self._sync_autocommit().connect() as conn:
                return work(conn)

        return await self._run(unit, retry=True, what=what)

    async def write(self, work: Work[T], *, what: str, atomic: bool, retry: bool) -> T:
        def unit() -> T:
            if not atomic:  # one self-contained statement: autocommit, one round trip
                with self._sync_autocommit().connect() as conn:
                    return work(conn)
            with self._sync_engine().begin() as conn:
                return work(conn)

        return await self._run(unit, retry=retry, what=what)

    async def migrate(self, work: Work[T], *, what: str) -> T:
        def unit() -> T:
            with self._sync_engine().begin() as conn:
                # Released at commit; a second server starting against the same empty
                # database waits here, then finds the schema at head.
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
                return work(conn)

        return await self._run(unit, retry=False, what=what)

    def pool_stats(self) -> PoolStats | None:
        pool = self._pool
        if pool is None:
            return None
        return PoolStats(
            size=pool.size() + self.settings.max_overflow,
            in_use=pool.checkedout(),
            waits=self._pool_waits,
        )

    async def _run(self, unit: Callable[[], T], *, retry: bool, what: str) -> T:
        pool = self._pool
        # Exact on the event loop: nothing else checks out between this test and the
        # unit's own checkout, which then waits (up to pool_timeout) for a return.
        if pool is not None and pool.checkedout() >= pool.size() + self.settings.max_overflow:
            self._pool_waits += 1
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                # The whole unit (pool checkout, statements, commit, return to the
                # pool) runs in one greenlet on the sync face of the async engine;
                # each driver call in it awaits asyncpg on this event loop. Entering
                # an AsyncConnection, run_sync and leaving it again cost three
                # greenlets and their bookkeeping per call instead (~18% more CPU).
                return await greenlet_spawn(unit)
            except Exception as error:
                if attempt < attempts and errors.is_disconnect(error):
                    continue
                errors.reraise(error, what)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _sync_engine(self) -> sa.Engine:
        return self.engine.sync_engine

    def _sync_autocommit(self) -> sa.Engine:
        if self._autocommit is None:
            raise RuntimeError("the database is not started")
        return self._autocommit.sync_engine

    async def start(self) -> None:
        asyncpg = _import_asyncpg()
        settings = self.settings

        async def connect() -> Any:
            # asyncpg parses the DSN like libpq does: TLS parameters (sslmode,
            # sslrootcert...) and server settings reach it unchanged.
            connection = await asyncpg.connect(
                settings.dsn,
                timeout=settings.connect_timeout,
                command_timeout=settings.command_timeout,
            )
            connections.keep_alive(connection, self._keepalive)
            return connection

        # Looked up when called, not imported by name: tracing's SQLAlchemy
        # instrumentation (bridge_store.tracing) wraps the module's function.
        engine = sqlalchemy.ext.asyncio.create_async_engine(
            "postgresql+asyncpg://",
            async_creator=connect,
            pool_size=settings.pool_size,
            max_overflow=settings.max_overflow,
            pool_timeout=settings.pool_timeout,
            pool_recycle=settings.pool_recycle,
            pool_pre_ping=settings.pool_pre_ping,
            hide_parameters=True,
        )

        connections.install_pool_hooks(engine.sync_engine)

        self._engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        pool = engine.sync_engine.pool
        self._pool = pool if isinstance(pool, QueuePool) else None

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = self._autocommit = None
        self._pool = None
