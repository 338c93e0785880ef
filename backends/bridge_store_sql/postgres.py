"""Postgres: SQLAlchemy's pool of asyncpg connections, statements sent by asyncpg itself.

The pool stays SQLAlchemy's (its checkout timeout, recycling, pre-ping, the hooks of
:func:`.connections.install_pool_hooks`, its counts for the metrics) and so does the
engine alembic migrates with. Every other unit of work checks a connection out of that
pool and sends its statements with asyncpg's ``fetch``/``execute``
(:mod:`.statements`), which reuse asyncpg's prepared statement for the same text.

The work functions are plain functions, shared with SQLite's worker threads; on
Postgres a unit runs in one greenlet on the event loop, and each statement awaits
asyncpg from inside it (``await_only``), so a unit costs one greenlet, not one per
statement, and that greenlet is one kept from an earlier unit (:mod:`.greenlets`).

A driver failure leaves the session as SQLAlchemy's ``DBAPIError`` of the matching
class (``IntegrityError`` for a unique violation...), with the statement but never its
parameters, and ``connection_invalidated`` when the connection is gone: :mod:`.errors`
translates those for every dialect alike.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
import sqlalchemy.ext.asyncio
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool
from sqlalchemy.util import await_only

from bridge_store.backend.substores import BackendOptions, PoolStats
from bridge_store.errors import ConfigurationError, unavailable
from bridge_store.urls import redact

from . import connections, errors
from .engine import MIGRATION_LOCK_KEY, Database, Work
from .greenlets import run_unit
from .settings import PostgresSettings
from .statements import Bound, Compiler, Result, Session

T = TypeVar("T")

_MISSING_ASYNCPG = (
    "postgresql:// stores need the asyncpg driver: pip install 'bridge-store[postgres]'"
)
#: SQLSTATE classes of a failed connection and of a server going away under us
#: (admin shutdown, crash, cannot connect now): the connection is not worth keeping.
_GONE_SQLSTATES = ("08", "57P01", "57P02", "57P03")


def _import_asyncpg() -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped]  # optional extra, imported late
    except ImportError:
        raise ConfigurationError(_MISSING_ASYNCPG) from None
    return asyncpg


def _rowcount(status: str) -> int:
    """Rows a command changed, from its tag: ``UPDATE 1``, ``INSERT 0 1``, ``DELETE 3``."""
    count = status.rpartition(" ")[2]
    return int(count) if count.isdigit() else -1


class PostgresSession(Session):
    def __init__(self, compiler: Compiler, driver: Any) -> None:
        super().__init__(compiler)
        self.driver = driver

    def run(self, bound: Bound) -> Result:
        try:
            if bound.many:
                await_only(self.driver.executemany(bound.sql, bound.args))
                return Result([], -1)
            if bound.returns_rows:
                rows = await_only(self.driver.fetch(bound.sql, *bound.args))
                return Result(rows, len(rows))
            return Result([], _rowcount(await_only(self.driver.execute(bound.sql, *bound.args))))
        except Exception as error:
            raise self._wrapped(error, bound) from error

    def _wrapped(self, error: Exception, bound: Bound) -> sa_exc.DBAPIError:
        state = getattr(error, "sqlstate", None)
        if isinstance(error, TimeoutError):
            # The statement timed out, and its connection with it: closing it politely
            # would wait on a cut-off server for one more timeout. Drop the socket.
            self.driver.terminate()
        gone = (
            isinstance(error, OSError | TimeoutError)
            or (isinstance(state, str) and state.startswith(_GONE_SQLSTATES))
            or self.driver.is_closed()
        )
        kind: type[sa_exc.DBAPIError] = sa_exc.DBAPIError
        if gone:
            kind = sa_exc.OperationalError
        elif isinstance(state, str) and state.startswith("23"):
            kind = sa_exc.IntegrityError
        elif isinstance(state, str) and state.startswith("22"):
            kind = sa_exc.DataError
        return kind(bound.sql, None, error, hide_parameters=True, connection_invalidated=gone)


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
        self._pool: QueuePool | None = None
        self._compiler: Compiler | None = None
        #: Units of work that found every pooled connection checked out (see _run).
        self._pool_waits = 0

    @property
    def engine(self) -> AsyncEngine:
        """The engine migrations go through (once started)."""
        if self._engine is None:
            raise RuntimeError("the database is not started")
        return self._engine

    async def read(self, work: Work[T], *, what: str) -> T:
        return await self._run(work, atomic=False, retry=True, what=what)

    async def write(
        self, work: Work[T], *, what: str, atomic: bool, retry: bool, doc_bytes: int | None = None
    ) -> T:
        # Not atomic: one self-contained statement, in autocommit (one round trip).
        return await self._run(work, atomic=atomic, retry=retry, what=what)

    async def migrate(self, work: Callable[[sa.Connection], T], *, what: str) -> T:
        def unit() -> T:
            with self.engine.sync_engine.begin() as conn:
                # Released at commit; a second server starting against the same empty
                # database waits here, then finds the schema at head.
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
                return work(conn)

        # No deadline: a migration may build indexes over every stored row.
        return await self._attempts(unit, retry=False, what=what, deadline=False)

    async def inspect(self, work: Callable[[sa.Connection], T], *, what: str) -> T:
        def unit() -> T:
            with self.engine.sync_engine.connect() as conn:
                return work(conn)

        return await self._attempts(unit, retry=True, what=what)

    def pool_stats(self) -> PoolStats | None:
        pool = self._pool
        if pool is None:
            return None
        return PoolStats(
            size=pool.size() + self.settings.max_overflow,
            in_use=pool.checkedout(),
            waits=self._pool_waits,
        )

    async def _run(self, work: Work[T], *, atomic: bool, retry: bool, what: str) -> T:
        pool, compiler = self._pool, self._compiler
        if pool is None or compiler is None:
            raise RuntimeError("the database is not started")

        def unit() -> T:
            fairy = pool.connect()
            session = PostgresSession(compiler, fairy.driver_connection)
            try:
                if not atomic:
                    return work(session)
                transaction = session.driver.transaction()
                await_only(transaction.start())
                try:
                    result = work(session)
                except BaseException:
                    if not session.driver.is_closed():
                        await_only(transaction.rollback())
                    raise
                await_only(transaction.commit())
                return result
            except sa_exc.DBAPIError as error:
                if error.connection_invalidated:
                    fairy.invalidate(error)
                raise
            except asyncio.CancelledError:
                # The call's deadline, perhaps mid-statement: drop the socket first (a
                # polite close would wait on a cut-off server), so the pool never hands
                # out a connection with a statement still in flight.
                if session.driver is not None:
                    session.driver.terminate()
                fairy.invalidate()
                raise
            finally:
                fairy.close()

        return await self._attempts(unit, retry=retry, what=what)

    async def _attempts(
        self, unit: Callable[[], T], *, retry: bool, what: str, deadline: bool = True
    ) -> T:
        """Run ``unit`` (again once after a lost connection, if ``retry``).

        The whole call, pool wait, connecting, statements and the retry together, ends
        within the longest of the URL's three timeouts (each is ``--backend-timeout``
        unless the URL sets it): a pre-ping that times out followed by a connect that
        times out must not add up to twice the timeout.
        """
        if not deadline:
            return await self._attempt(unit, retry=retry, what=what)
        seconds = self.call_seconds
        try:
            async with asyncio.timeout(seconds):
                return await self._attempt(unit, retry=retry, what=what)
        except TimeoutError:
            raise unavailable(
                f"{what}: no answer from the database within {seconds:g} s (the backend timeout)"
            ) from None

    @property
    def call_seconds(self) -> float:
        """The longest one call may take, all its steps together."""
        settings = self.settings
        return max(settings.pool_timeout, settings.connect_timeout, settings.command_timeout)

    async def _attempt(self, unit: Callable[[], T], *, retry: bool, what: str) -> T:
        pool = self._pool
        # Exact on the event loop: nothing else checks out between this test and the
        # unit's own checkout, which then waits (up to pool_timeout) for a return.
        if pool is not None and pool.checkedout() >= pool.size() + self.settings.max_overflow:
            self._pool_waits += 1
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                return await run_unit(unit)
            except Exception as error:
                if attempt < attempts and errors.is_disconnect(error):
                    continue
                errors.reraise(error, what)
        raise AssertionError("unreachable: the last attempt returns or raises")

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
        # instrumentation (bridge_store.ops.tracing) wraps the module's function.
        engine = sqlalchemy.ext.asyncio.create_async_engine(
            "postgresql+asyncpg://",
            async_creator=connect,
            pool_size=settings.pool_size,
            max_overflow=settings.max_overflow,
            pool_timeout=settings.pool_timeout,
            pool_recycle=settings.pool_recycle,
            pool_pre_ping=settings.pool_pre_ping,
            # Sessions end their own transactions (and a failed one is rolled back
            # before the connection goes back); migrations commit or roll back theirs.
            pool_reset_on_return=None,
            hide_parameters=True,
        )
        connections.install_pool_hooks(engine.sync_engine)
        self._engine = engine
        self._compiler = Compiler(engine.dialect)
        pool = engine.sync_engine.pool
        self._pool = pool if isinstance(pool, QueuePool) else None

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = None
        self._pool = None
