"""The SQLite worker threads: batches, group commit, and failures kept per job."""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bridge_store_sql.sqlite import SqliteSession
from bridge_store_sql.sqlite_threads import (
    BatchingThreads,
    ClosedError,
    Job,
    run_reads,
    run_writes,
)
from bridge_store_sql.statements import Compiler, Session

#: How long these writes wait for the write lock (nobody else holds it here).
LOCK_WAIT_MS = 1000


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    engine = sa.create_engine(
        f"sqlite+pysqlite:///{tmp_path / 'threads.db'}",
        # Driver autocommit, as the backend's connections: the work begins and ends
        # its own transactions.
        connect_args={"check_same_thread": False, "isolation_level": None},
    )
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return engine


def sessions(engine: sa.Engine) -> functools.partial[SqliteSession]:
    return functools.partial(SqliteSession, Compiler(engine.dialect))


def insert(key: str, conn: Session) -> str:
    conn.execute(sa.text("INSERT INTO t (k) VALUES (:k)"), {"k": key})
    return key


def keys(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.scalars(sa.text("SELECT k FROM t ORDER BY k")))


def batch_of(*works: functools.partial[str]) -> list[Job[str]]:
    loop = asyncio.new_event_loop()
    try:
        return [Job(work, loop.create_future()) for work in works]
    finally:
        loop.close()


def test_a_batch_commits_together(engine: sa.Engine) -> None:
    batch = batch_of(*(functools.partial(insert, key) for key in "abc"))
    run_writes(engine, sessions(engine), LOCK_WAIT_MS, batch)
    assert [(job.failed, job.outcome) for job in batch] == [
        (False, "a"),
        (False, "b"),
        (False, "c"),
    ]
    assert keys(engine) == ["a", "b", "c"]


def test_a_failing_job_fails_alone(engine: sa.Engine) -> None:
    run_writes(engine, sessions(engine), LOCK_WAIT_MS, batch_of(functools.partial(insert, "dup")))
    batch = batch_of(
        functools.partial(insert, "x"),
        functools.partial(insert, "dup"),
        functools.partial(insert, "y"),
    )
    run_writes(engine, sessions(engine), LOCK_WAIT_MS, batch)
    assert [job.failed for job in batch] == [False, True, False]
    assert isinstance(batch[1].outcome, sa.exc.IntegrityError)
    # The batch's transaction rolled back, then each job ran alone: x and y are stored once.
    assert keys(engine) == ["dup", "x", "y"]


def test_reads_fail_per_job(engine: sa.Engine) -> None:
    run_writes(engine, sessions(engine), LOCK_WAIT_MS, batch_of(functools.partial(insert, "a")))

    def count(conn: Session) -> int:
        return int(conn.scalar(sa.text("SELECT count(*) FROM t")) or 0)

    def broken(conn: Session) -> int:
        return int(conn.scalar(sa.text("SELECT count(*) FROM missing_table")) or 0)

    loop = asyncio.new_event_loop()
    try:
        batch = [Job(count, loop.create_future()), Job(broken, loop.create_future())]
        batch.append(Job(count, loop.create_future()))
    finally:
        loop.close()
    run_reads(engine, sessions(engine), batch)
    assert [(job.failed, job.outcome if not job.failed else None) for job in batch] == [
        (False, 1),
        (True, None),
        (False, 1),
    ]


class RecordingBatches:
    """``run_writes`` that also records the size of every batch a thread ran."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.sizes: list[int] = []

    def __call__(self, batch: list[Job[Any]]) -> None:
        self.sizes.append(len(batch))
        run_writes(self.engine, sessions(self.engine), LOCK_WAIT_MS, batch)


async def test_submissions_of_one_loop_turn_run_as_one_batch(engine: sa.Engine) -> None:
    batches = RecordingBatches(engine)
    writer = BatchingThreads("test-writer", 1, batches)
    try:
        # gather starts every submission in the same turn of the event loop.
        results = await asyncio.gather(
            *(writer.submit(functools.partial(insert, f"k{index:03}")) for index in range(200)),
            writer.submit(functools.partial(insert, "k000")),
            return_exceptions=True,
        )
    finally:
        await writer.close()
    # One hand-over, one batch: the duplicate failed it, so each job then ran alone,
    # and only the duplicate's caller saw the failure.
    assert batches.sizes == [201]
    assert results[:200] == [f"k{index:03}" for index in range(200)]
    assert isinstance(results[200], sa.exc.IntegrityError)
    assert keys(engine) == [f"k{index:03}" for index in range(200)]


async def test_close_finishes_queued_work_then_refuses(engine: sa.Engine) -> None:
    batches = RecordingBatches(engine)
    writer = BatchingThreads("test-writer", 1, batches)
    working, release = threading.Event(), threading.Event()

    def occupy(conn: Session) -> str:
        working.set()
        release.wait(60)
        return "occupied"

    # The only writer thread is busy, so what is submitted next stays queued.
    first = asyncio.ensure_future(writer.submit(occupy))
    assert await asyncio.to_thread(working.wait, 60)
    queued = [
        asyncio.ensure_future(writer.submit(functools.partial(insert, f"q{index}")))
        for index in range(10)
    ]
    await asyncio.sleep(0)  # the submissions are made
    closing = asyncio.ensure_future(writer.close())
    await asyncio.sleep(0)  # close() has begun
    assert not any(job.done() for job in [first, *queued])
    assert keys(engine) == []
    # Closed to new work while the queued work is still waiting for the thread.
    with pytest.raises(ClosedError):
        await writer.submit(functools.partial(insert, "late"))
    release.set()
    async with asyncio.timeout(60):
        await closing
        assert await first == "occupied"
        assert await asyncio.gather(*queued) == [f"q{index}" for index in range(10)]
    assert batches.sizes == [1, 10]
    assert keys(engine) == [f"q{index}" for index in range(10)]
