"""SQLite point lookups and event pages run on the event loop's thread, not a reader's.

A hand-over to a reader thread and back costs more CPU than a short indexed read
(docs/benchmarks.md, "CPU per call in process"): the reads in ``LOOP_READS`` run on a
connection of the loop's own, which never waits for a lock; one that finds the file
busy goes to the reader threads after all. Everything else still goes to the threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc as sa_exc

from bridge_store_sql.settings import SqliteSettings
from bridge_store_sql.sqlite import LOOP_READS, SqliteDatabase


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    db = SqliteDatabase(SqliteSettings(path=tmp_path / "store.db"))
    await db.start()
    try:
        yield db
    finally:
        await db.close()


def _where(session: Any) -> tuple[int, int]:
    """The thread a read ran on, and the answer of a real statement there."""
    return threading.get_ident(), session.driver.execute("SELECT 41 + 1").fetchone()[0]


async def test_point_lookups_and_event_pages_run_on_the_loop(database: SqliteDatabase) -> None:
    assert {"agents.get", "runs.get", "runEvents.list"} <= LOOP_READS
    for what in ("agents.get", "runs.get", "runEvents.list"):
        assert await database.read(_where, what=what) == (threading.get_ident(), 42)


async def test_other_reads_still_go_to_a_reader_thread(database: SqliteDatabase) -> None:
    for what in ("agents.list", "checkpoints.get", "runs.history"):
        thread, answer = await database.read(_where, what=what)
        assert answer == 42
        assert thread != threading.get_ident()


def _busy_error(directory: Path) -> sqlite3.OperationalError:
    """A real SQLITE_BUSY: a connection that may not wait, against an exclusive lock."""
    path = directory / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiter = sqlite3.connect(path, timeout=0)
    try:
        waiter.execute("SELECT * FROM t")
    except sqlite3.OperationalError as error:
        return error
    finally:
        waiter.close()
        holder.close()
    raise AssertionError("the exclusive lock did not make the read busy")


async def test_a_busy_file_sends_the_read_to_the_threads(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    busy = _busy_error(tmp_path)
    assert busy.sqlite_errorcode == sqlite3.SQLITE_BUSY
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def work(session: Any) -> str:
        threads.append(threading.get_ident())
        if threading.get_ident() == loop_thread:
            raise sa_exc.OperationalError("SELECT", None, busy)
        return "read on a reader thread"

    assert await database.read(work, what="agents.get") == "read on a reader thread"
    assert threads[0] == loop_thread
    assert threads[1] != loop_thread


async def test_other_failures_on_the_loop_are_the_calls_own(database: SqliteDatabase) -> None:
    def broken(session: Any) -> None:
        session.driver.execute("SELECT * FROM no_such_table")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await database.read(broken, what="agents.get")
