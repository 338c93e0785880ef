"""Worker threads that run SQLite work handed over from the event loop, in batches.

sqlite3 calls block, so they run off the event loop; but each hand-over between the
loop and a thread costs far more CPU than a small statement (a wake-up on each side
and a fight for the GIL: about 150 us, against 60 us for a whole append). So jobs
submitted in the same turn of the event loop (requests that arrived together) are
handed over as one, a thread that wakes up takes every job queued meanwhile, runs them
one after another, and hands all the results back to the loop in one call.

For writes the batch is also one transaction: one ``BEGIN IMMEDIATE`` and one commit
for every append that arrived while the previous batch was committing (group commit).
If any job of a batch fails, the transaction rolls back and each job runs again in a
transaction of its own, so a failure only ever reaches the call that caused it.

Each job runs in the context (``contextvars``) of the call that submitted it, and the
batch's own statements (connecting, ``BEGIN``) in its first job's: a trace span or a
log line made on a worker thread belongs to the call it works for.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import sqlalchemy as sa

from .connections import begin_immediate

T = TypeVar("T")


class SqliteSession(Protocol):
    """What the threads need of a session over a pooled sqlite3 connection
    (:class:`.sqlite.SqliteSession` is one): a protocol, so this module does not
    import the one that builds on it."""

    driver: sqlite3.Connection

    def command(self, sql: str) -> None:
        """A statement without parameters or rows: BEGIN, COMMIT, ROLLBACK."""


S = TypeVar("S", bound=SqliteSession)

#: Makes a session over a pooled sqlite3 connection.
Sessions = Callable[[sqlite3.Connection], SqliteSession]

#: Jobs one wake-up takes, give or take one hand-over: bounds how long the first job of
#: a batch waits for the others, and the size of one write transaction.
MAX_BATCH = 64


@dataclass(slots=True)
class Job(Generic[T]):
    """One unit of work and where its outcome goes."""

    #: Over a :class:`.sqlite.SqliteSession`, or a SQLAlchemy Connection (``schema``).
    work: Callable[[Any], T]
    future: asyncio.Future[T]
    #: False for work that must have a transaction to itself (a schema upgrade).
    batchable: bool = True
    #: alembic's work, which needs SQLAlchemy's Connection.
    schema: bool = False
    outcome: Any = field(default=None)
    failed: bool = False
    #: The submitting call's context, in which the work runs.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)

    def run(self, conn: Any) -> T:
        return self.context.run(self.work, conn)

    def succeed(self, value: T) -> None:
        self.outcome, self.failed = value, False

    def fail(self, error: BaseException) -> None:
        self.outcome, self.failed = error, True


class ClosedError(RuntimeError):
    """Work was submitted after :meth:`BatchingThreads.close`."""


class BatchingThreads:
    """``count`` threads serving one queue; ``run_batch`` runs the jobs of a wake-up."""

    def __init__(self, name: str, count: int, run_batch: Callable[[list[Job[Any]]], None]) -> None:
        self._run_batch = run_batch
        self._queue: queue.SimpleQueue[list[Job[Any]] | None] = queue.SimpleQueue()
        #: Jobs submitted during the current turn of the event loop, not yet queued.
        self._pending: list[Job[Any]] = []
        self._closed = False
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{index}", daemon=True)
            for index in range(count)
        ]
        for thread in self._threads:
            thread.start()

    async def submit(
        self, work: Callable[[Any], T], *, batchable: bool = True, schema: bool = False
    ) -> T:
        if self._closed:
            raise ClosedError("the store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._hand_over)
        self._pending.append(Job(work, future, batchable, schema))
        return await future

    def _hand_over(self) -> None:
        jobs, self._pending = self._pending, []
        if jobs:
            self._queue.put(jobs)

    async def close(self) -> None:
        """Stop taking work, finish what was submitted and join the threads.

        Called on the event loop that submits, so no submission can slip in between.
        """
        self._closed = True
        self._hand_over()
        for _ in self._threads:
            self._queue.put(None)
        await asyncio.to_thread(self._join)

    def _join(self) -> None:
        for thread in self._threads:
            thread.join()

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = list(first)
            stop = False
            while len(batch) < MAX_BATCH:
                try:
                    jobs = self._queue.get_nowait()
                except queue.Empty:
                    break
                if jobs is None:
                    stop = True
                    break
                batch.extend(jobs)
            # A copy: the first job's own context is entered again to run its work.
            batch[0].context.copy().run(self._run_batch, batch)
            self._deliver(batch)
            if stop:
                return

    @staticmethod
    def _deliver(batch: list[Job[Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Job[Any]]] = {}
        for job in batch:
            by_loop.setdefault(job.future.get_loop(), []).append(job)
        for loop, jobs in by_loop.items():
            # A closed loop means nobody is waiting any more (the process is ending).
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, jobs)


def _resolve(batch: list[Job[Any]]) -> None:
    for job in batch:
        if job.future.cancelled():
            continue  # the caller gave up (deadline, disconnect); the work still ran
        if job.failed:
            job.future.set_exception(job.outcome)
        else:
            job.future.set_result(job.outcome)


@contextlib.contextmanager
def _checked_out(engine: sa.Engine, sessions: Sessions) -> Iterator[SqliteSession]:
    """A session over one of ``engine``'s pooled sqlite3 connections, returned after."""
    fairy = engine.raw_connection()
    try:
        connection = fairy.driver_connection
        assert isinstance(connection, sqlite3.Connection)
        yield sessions(connection)
    finally:
        fairy.close()


def run_reads(engine: sa.Engine, sessions: Sessions, batch: list[Job[Any]]) -> None:
    """Each read on one connection, outside any transaction; failures stay per job."""
    with _checked_out(engine, sessions) as session:
        for job in batch:
            try:
                if job.schema:
                    with engine.connect() as conn:
                        job.succeed(job.run(conn))
                else:
                    job.succeed(job.run(session))
            except Exception as error:
                job.fail(error)


def run_writes(
    engine: sa.Engine, sessions: Sessions, lock_wait_ms: int, batch: list[Job[Any]]
) -> None:
    """The batch in one transaction; on any failure, each job in its own. Each waits
    up to ``lock_wait_ms`` for the write lock."""
    if len(batch) > 1 and all(job.batchable for job in batch):
        outcomes = _in_one_transaction(engine, sessions, lock_wait_ms, batch)
        if outcomes is not None:
            for job, outcome in zip(batch, outcomes, strict=True):
                job.succeed(outcome)
            return
    for job in batch:
        try:
            if job.schema:
                # alembic's work: the engine's "begin" hook takes the lock up front.
                with engine.begin() as conn:
                    job.succeed(job.run(conn))
            else:
                job.succeed(_transaction(engine, sessions, lock_wait_ms, [job])[0])
        except Exception as error:
            job.fail(error)


def _transaction(
    engine: sa.Engine, sessions: Sessions, lock_wait_ms: int, jobs: list[Job[Any]]
) -> list[Any]:
    """The jobs' outcomes in one write transaction, committed; rolled back if any fails."""
    with _checked_out(engine, sessions) as session:
        # Take the write lock up front: a deferred transaction that reads and then
        # writes can fail with SQLITE_BUSY without waiting at all.
        begin_immediate(lambda: session.command("BEGIN IMMEDIATE"), lock_wait_ms)
        return committed(session, lambda conn: [job.run(conn) for job in jobs])


def committed(session: S, work: Callable[[S], T]) -> T:
    """``work`` in the transaction ``session`` has begun, then its commit; rolled back
    if either fails (the writer thread's transactions and the loop's write)."""
    try:
        outcome = work(session)
        session.command("COMMIT")
    except BaseException:
        if session.driver.in_transaction:
            session.command("ROLLBACK")
        raise
    return outcome


def _in_one_transaction(
    engine: sa.Engine, sessions: Sessions, lock_wait_ms: int, batch: list[Job[Any]]
) -> list[Any] | None:
    """Every job's outcome, committed together; None if any failed (all rolled back)."""
    try:
        return _transaction(engine, sessions, lock_wait_ms, batch)
    except Exception:
        # Which job failed, and whether the others would have succeeded alone, is
        # found by running each in its own transaction next.
        return None
