"""SQLite: one file, a writer thread and reader threads, statements sent by sqlite3.

SQLAlchemy keeps the two connection pools (and the PRAGMAs each new connection gets)
and runs alembic's migrations; every other unit of work gets a
:class:`.statements.Session` over the pooled sqlite3 connection itself, on the worker
thread that runs it (:mod:`.sqlite_threads`).
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.pool import QueuePool

from bridge_store.backend.substores import PoolStats
from bridge_store.errors import ConfigurationError, unavailable

from . import connections, errors
from .engine import Database, SchemaWork, Work
from .settings import SqliteSettings
from .sqlite_checkpoints import Checkpointer, checkpoint_connection
from .sqlite_threads import BatchingThreads, ClosedError, committed, run_reads, run_writes
from .statements import Bound, Compiler, Result, Session

T = TypeVar("T")

#: Reads run on the event loop's own thread, on a connection of its own: point lookups
#: by key and one page of a run's events. Each is a few tens of microseconds of
#: SQLite; a hand-over to a reader thread and back cost more than that (bench
#: cpu-per-call --mix agents.get: 96 us a call through the threads, see
#: docs/performance.md). The loop's connection never waits for a lock
#: (busy_timeout 0): a read that finds the file busy goes to the threads instead.
LOOP_READS = frozenset({"agents.get", "runs.get", "runEvents.list"})

#: Reads that may copy a checkpoint blob of up to the request limit: on threads of their
#: own, so a small read never waits in a batch behind one (a small call beside two
#: 80 MiB gets waited 474 ms on the shared reader threads).
BLOB_READS = frozenset({"checkpoints.get"})
#: Threads for BLOB_READS, each with a connection of its own.
BLOB_READERS = 2

#: Writes of one small document that run on the loop's thread when nothing else of this
#: database is in flight: a client that calls one at a time (a bridge's turn) would
#: otherwise pay two thread wake-ups a write, about 150 us here, more than the write's
#: own statements. With anything in flight they go to the writer thread, whose group
#: commit serves concurrent writers far better than a loop that commits alone.
LOOP_WRITES = frozenset(
    {"runEvents.append", "runs.update", "agents.update", "runs.create", "agents.create"}
)
#: The largest document such a write may carry: beyond it, the statements (the
#: full-text index's above all) would hold the loop for longer than a hand-over costs.
LOOP_WRITE_MAX_BYTES = 16 * 1024


class SqliteSession(Session):
    def __init__(self, compiler: Compiler, driver: sqlite3.Connection) -> None:
        super().__init__(compiler)
        self.driver = driver

    def run(self, bound: Bound) -> Result:
        try:
            if bound.many:
                cursor = self.driver.cursor().executemany(bound.sql, bound.args)
                return Result([], cursor.rowcount)
            # Through a cursor, not the connection's execute shortcut: tracing's
            # sqlite3 instrumentation wraps the cursors of the connections it makes.
            cursor = self.driver.cursor().execute(bound.sql, bound.args)
            rows = cursor.fetchall() if cursor.description is not None else []
            return Result(rows, cursor.rowcount)
        except sqlite3.Error as error:
            raise self.wrapped(error, bound.sql) from error

    def command(self, sql: str) -> None:
        """A statement without parameters or rows: BEGIN, COMMIT, ROLLBACK."""
        try:
            self.driver.execute(sql)
        except sqlite3.Error as error:
            raise self.wrapped(error, sql) from error

    def wrapped(self, error: sqlite3.Error, sql: str) -> sa_exc.DBAPIError:
        # SQLAlchemy's class for the driver's (IntegrityError, OperationalError...).
        wrapped = sa_exc.DBAPIError.instance(
            sql, None, error, sqlite3.Error, hide_parameters=True, dialect=self.dialect
        )
        assert isinstance(wrapped, sa_exc.DBAPIError)
        return wrapped


class SqliteDatabase(Database):
    """One SQLite file: a writer thread, a pool of reader threads, and two connections
    of the event loop's own.

    sqlite3 calls block, so work goes to threads in batches (:mod:`.sqlite_threads`),
    except work shorter than a hand-over: ``LOOP_READS``, and ``LOOP_WRITES`` when
    nothing else is in flight, on the loop's connections, which never wait for a lock.
    The single writer thread serializes this process's other writes, which SQLite
    would serialize anyway; other processes queue on the file lock.
    """

    dialect: Literal["sqlite", "postgresql"] = "sqlite"

    def __init__(self, settings: SqliteSettings) -> None:
        super().__init__(f"sqlite:///{settings.path}")
        self.settings = settings
        self._write_engine: sa.Engine | None = None
        self._read_engine: sa.Engine | None = None
        self._writer: BatchingThreads | None = None
        self._readers: BatchingThreads | None = None
        self._blob_engine: sa.Engine | None = None
        self._blob_readers: BatchingThreads | None = None
        self._loop_engine: sa.Engine | None = None
        #: The loop thread's read connection (LOOP_READS), checked out while started.
        self._loop_connection: Any = None
        self._loop_session: SqliteSession | None = None
        #: The loop thread's write connection (LOOP_WRITES), checked out while started.
        self._loop_write_engine: sa.Engine | None = None
        self._loop_write_connection: Any = None
        self._loop_write_session: SqliteSession | None = None
        #: Work handed to the threads and not yet answered.
        self._in_flight = 0
        self._checkpointer: Checkpointer | None = None

    def _configure(
        self, engine: sa.Engine, *, writer: bool, busy_timeout: int, wal_wait: int | None = None
    ) -> None:
        """``busy_timeout`` for the connection's statements; ``wal_wait`` (default: the
        same) for the switch to WAL as it connects, which must wait its turn on a file
        other processes hold even for a connection whose reads never wait, and for a
        writer's ``BEGIN IMMEDIATE`` (:func:`.connections.begin_immediate`)."""
        lock_wait = busy_timeout if wal_wait is None else wal_wait

        @sa.event.listens_for(engine, "connect")
        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Driver autocommit: the driver must not open transactions behind our
            # back; writes BEGIN IMMEDIATE themselves (below), reads need none.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout}")
            connections.enable_wal(cursor, busy_timeout if wal_wait is None else wal_wait)
            # In WAL mode NORMAL survives a crash of the process; a power loss may roll
            # back the last commits. FULL would fsync on every append.
            cursor.execute("PRAGMA synchronous = NORMAL")
            if writer:
                # Checkpoints run on a thread of their own (sqlite_checkpoints).
                cursor.execute("PRAGMA wal_autocheckpoint = 0")
            else:
                cursor.execute("PRAGMA query_only = 1")
            cursor.close()

        if writer:

            @sa.event.listens_for(engine, "begin")
            def on_begin(conn: sa.Connection) -> None:
                # Migrations too take the write lock up front (see sqlite_threads).
                connections.begin_immediate(
                    lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"), lock_wait
                )

    def require_existing(self) -> None:
        path = self.settings.path
        if not path.is_file():
            raise ConfigurationError(
                f"no database at {path.absolute()} (nothing was created): check the path, "
                f"or create one with `bridge-store db upgrade --store sqlite:///{path}`"
            )

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
        busy_timeout = self.settings.busy_timeout_ms
        # The writer waits for the write lock itself, asking often (begin_immediate),
        # not through SQLite's busy handler, whose sleeps grow to 100 ms.
        self._configure(write_engine, writer=True, busy_timeout=0, wal_wait=busy_timeout)
        self._configure(read_engine, writer=False, busy_timeout=busy_timeout)
        self._write_engine, self._read_engine = write_engine, read_engine
        sessions = functools.partial(SqliteSession, Compiler(write_engine.dialect))
        loop_engine = sa.create_engine(url, pool_size=1, **options)
        self._configure(loop_engine, writer=False, busy_timeout=0, wal_wait=busy_timeout)
        self._loop_engine = loop_engine
        # Connecting may wait on other processes' locks (enable_wal): not on the loop.
        self._loop_connection = await asyncio.to_thread(loop_engine.raw_connection)
        self._loop_session = sessions(self._loop_connection.driver_connection)
        # Never waits for the write lock either: a write that finds it taken (another
        # process writes) goes to the writer thread, which waits busy_timeout.
        loop_write_engine = sa.create_engine(url, pool_size=1, **options)
        self._configure(loop_write_engine, writer=True, busy_timeout=0, wal_wait=busy_timeout)
        self._loop_write_engine = loop_write_engine
        self._loop_write_connection = await asyncio.to_thread(loop_write_engine.raw_connection)
        self._loop_write_session = sessions(self._loop_write_connection.driver_connection)
        self._writer = BatchingThreads(
            "bridge-store-sqlite-writer",
            1,
            functools.partial(run_writes, write_engine, sessions, busy_timeout),
        )
        self._readers = BatchingThreads(
            "bridge-store-sqlite-reader",
            readers,
            functools.partial(run_reads, read_engine, sessions),
        )
        blob_engine = sa.create_engine(url, pool_size=BLOB_READERS, **options)
        self._configure(blob_engine, writer=False, busy_timeout=busy_timeout)
        self._blob_engine = blob_engine
        self._blob_readers = BatchingThreads(
            "bridge-store-sqlite-blob-reader",
            BLOB_READERS,
            functools.partial(run_reads, blob_engine, sessions),
        )
        self._checkpointer = Checkpointer(functools.partial(checkpoint_connection, str(path)))
        self._checkpointer.start()

    async def close(self) -> None:
        engines = [
            e
            for e in (
                self._read_engine,
                self._write_engine,
                self._loop_engine,
                self._loop_write_engine,
                self._blob_engine,
            )
            if e is not None
        ]
        workers = [w for w in (self._readers, self._blob_readers, self._writer) if w is not None]
        self._read_engine = self._write_engine = self._loop_engine = None
        self._loop_write_engine = self._blob_engine = None
        self._readers = self._blob_readers = self._writer = None
        self._loop_session = self._loop_write_session = None
        for connection in (self._loop_connection, self._loop_write_connection):
            if connection is not None:
                connection.close()
        self._loop_connection = self._loop_write_connection = None

        # Work already submitted finishes first: a write in flight commits or rolls
        # back, it is never cut off.
        for worker in workers:
            await worker.close()
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await asyncio.to_thread(checkpointer.close)

        def dispose() -> None:
            for engine in engines:
                engine.dispose()

        await asyncio.to_thread(dispose)

    async def read(self, work: Work[T], *, what: str) -> T:
        session = self._loop_session
        if session is not None and what in LOOP_READS:
            try:
                return work(session)
            except sa_exc.OperationalError as error:
                if not connections.is_busy(error):
                    errors.reraise(error, what)
                # The file is locked for a moment (a checkpoint, a recovery): wait for
                # it on a reader thread, never on the loop.
            except Exception as error:
                errors.reraise(error, what)
        readers = self._blob_readers if what in BLOB_READS else self._readers
        return await self._submit(readers, work, what)

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

    async def write(
        self, work: Work[T], *, what: str, atomic: bool, retry: bool, doc_bytes: int | None = None
    ) -> T:
        # Every SQLite write is a transaction (BEGIN IMMEDIATE), atomic or not; a local
        # file has no dead connections to retry.
        session = self._loop_write_session
        if (
            session is not None
            and self._in_flight == 0
            and what in LOOP_WRITES
            and doc_bytes is not None
            and doc_bytes <= LOOP_WRITE_MAX_BYTES
        ):
            written = _write_on_loop(session, work, what)
            if written is not _LOCKED:
                self._written()
                return cast("T", written)
        outcome = await self._submit(self._writer, work, what)
        self._written()
        return outcome

    def _written(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.written()

    async def migrate(self, work: SchemaWork[T], *, what: str) -> T:
        # BEGIN IMMEDIATE already keeps other processes' upgrades out until commit.
        outcome = await self._submit(self._writer, work, what, batchable=False, schema=True)
        self._written()
        return outcome

    async def inspect(self, work: SchemaWork[T], *, what: str) -> T:
        return await self._submit(self._readers, work, what, schema=True)

    async def _submit(
        self,
        worker: BatchingThreads | None,
        work: Callable[[Any], T],
        what: str,
        *,
        batchable: bool = True,
        schema: bool = False,
    ) -> T:
        if worker is None:
            raise RuntimeError("the database is not started")
        self._in_flight += 1
        try:
            return await worker.submit(work, batchable=batchable, schema=schema)
        except ClosedError:
            raise unavailable(f"{what}: the store is closing") from None
        except Exception as error:
            errors.reraise(error, what)
        finally:
            self._in_flight -= 1


#: What :func:`_write_on_loop` answers when the file's write lock is taken.
_LOCKED = object()


def _write_on_loop(session: SqliteSession, work: Work[T], what: str) -> T | object:
    """``work`` in a transaction of its own on the loop's write connection, committed;
    :data:`_LOCKED` (nothing done) if another connection holds the write lock."""
    try:
        session.command("BEGIN IMMEDIATE")
    except sa_exc.OperationalError as error:
        if connections.is_busy(error):
            return _LOCKED
        errors.reraise(error, what)
    # The commit never checkpoints (wal_autocheckpoint 0): that is sqlite_checkpoints'.
    try:
        return committed(session, work)
    except Exception as error:
        errors.reraise(error, what)
