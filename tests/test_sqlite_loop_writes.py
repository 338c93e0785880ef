"""SQLite writes of one small document run on the event loop's thread when nothing else
of the database is in flight, and on the writer thread otherwise.

A client that calls one at a time (a bridge's turn) would pay two thread wake-ups per
write; concurrent writers keep the writer thread's group commit. The loop's write
connection never waits for the lock (another connection's write sends the work to
the writer thread) and, as the writer's, never checkpoints the WAL (a thread of its
own does: tests/test_sqlite_checkpoints.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge_store_sql.settings import SqliteSettings
from bridge_store_sql.sqlite import (
    LOOP_WRITE_MAX_BYTES,
    LOOP_WRITES,
    SqliteDatabase,
)

SMALL = 100


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    db = SqliteDatabase(SqliteSettings(path=tmp_path / "store.db", busy_timeout_ms=5000))
    await db.start()

    def create(session: Any) -> None:
        session.driver.execute("CREATE TABLE t (k TEXT PRIMARY KEY, thread INTEGER)")

    # A schema change of its own, on the writer thread (not a loop write).
    await db.write(create, what="test.create", atomic=True, retry=False)
    try:
        yield db
    finally:
        await db.close()


def insert(key: str) -> Any:
    """Work that stores ``key`` with the thread it ran on; answers that thread."""

    def work(session: Any) -> int:
        thread = threading.get_ident()
        session.driver.execute("INSERT INTO t (k, thread) VALUES (?, ?)", (key, thread))
        return thread

    return work


def stored(path: Path) -> dict[str, int]:
    """What another connection reads: committed rows only."""
    with contextlib.closing(sqlite3.connect(path)) as reader:
        return dict(reader.execute("SELECT k, thread FROM t").fetchall())


async def write(db: SqliteDatabase, work: Any, what: str = "runEvents.append", **kw: Any) -> Any:
    return await db.write(work, what=what, atomic=False, retry=False, **{"doc_bytes": SMALL, **kw})


async def test_a_small_write_with_nothing_in_flight_runs_on_the_loop_and_commits(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    assert {"runEvents.append", "runs.update", "agents.update"} <= LOOP_WRITES
    loop_thread = threading.get_ident()
    for what in sorted(LOOP_WRITES):
        assert await write(database, insert(what), what) == loop_thread
    assert stored(tmp_path / "store.db") == dict.fromkeys(sorted(LOOP_WRITES), loop_thread)


async def test_other_and_larger_writes_go_to_the_writer_thread(
    database: SqliteDatabase,
) -> None:
    loop_thread = threading.get_ident()
    assert await write(database, insert("delete"), "agents.delete") != loop_thread
    assert await write(database, insert("unknown size"), doc_bytes=None) != loop_thread
    large = LOOP_WRITE_MAX_BYTES + 1
    assert await write(database, insert("large"), doc_bytes=large) != loop_thread
    assert await write(database, insert("limit"), doc_bytes=LOOP_WRITE_MAX_BYTES) == loop_thread


async def test_a_write_goes_to_the_writer_thread_while_other_work_is_in_flight(
    database: SqliteDatabase,
) -> None:
    loop_thread = threading.get_ident()
    started, release = threading.Event(), threading.Event()

    def slow_read(session: Any) -> str:
        started.set()
        release.wait(10)
        return "read"

    reading = asyncio.create_task(database.read(slow_read, what="agents.list"))
    assert await asyncio.to_thread(started.wait, 10)
    # The read is on a reader thread: this write is not alone, so the writer thread
    # takes it (and would take any write arriving with it, in one transaction).
    assert await write(database, insert("beside a read")) != loop_thread
    release.set()
    assert await reading == "read"
    assert await write(database, insert("alone again")) == loop_thread


async def test_a_failing_loop_write_rolls_back_and_is_the_calls_own_error(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    def twice(session: Any) -> None:
        session.driver.execute("INSERT INTO t (k, thread) VALUES ('twice', 0)")
        session.driver.execute("INSERT INTO t (k, thread) VALUES ('twice', 0)")

    # The same error as the writer thread's: the connection fails the call alike.
    with pytest.raises(Exception, match="UNIQUE constraint failed") as on_thread:
        await write(database, twice, "agents.delete")
    with pytest.raises(type(on_thread.value), match="UNIQUE constraint failed"):
        await write(database, twice)
    assert stored(tmp_path / "store.db") == {}
    # The connection is out of that transaction: the next write commits on the loop.
    assert await write(database, insert("after")) == threading.get_ident()
    assert list(stored(tmp_path / "store.db")) == ["after"]


async def test_a_write_that_finds_the_file_locked_waits_on_the_writer_thread(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    holder = sqlite3.connect(tmp_path / "store.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.3, holder.rollback)
    timer.start()
    try:
        # The loop's connection may not wait: the writer thread waits for the lock.
        thread = await write(database, insert("after the lock"))
    finally:
        timer.join()
        holder.close()
    assert thread != threading.get_ident()
    assert stored(tmp_path / "store.db") == {"after the lock": thread}


async def test_neither_the_loops_nor_the_writers_connection_checkpoints(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    loop_thread = threading.get_ident()
    assert await write(database, insert("on the loop")) == loop_thread

    def autocheckpoint(session: Any) -> int:
        return int(session.driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    session = database._loop_write_session
    assert session is not None
    assert autocheckpoint(session) == 0
    assert await write(database, autocheckpoint, "agents.delete") == 0
    assert list(stored(tmp_path / "store.db")) == ["on the loop"]
