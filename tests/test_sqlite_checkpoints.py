"""SQLite's WAL is checkpointed on a thread of its own (``sqlite_checkpoints``), so no
write waits for a checkpoint: PASSIVE rounds after writes, a RESTART once the log is
long, a failure logged without data and tried again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_store_sql.settings import SqliteSettings
from bridge_store_sql.sqlite import SqliteDatabase
from bridge_store_sql.sqlite_checkpoints import Checkpointer, checkpoint_connection


@contextlib.contextmanager
def wal_file(tmp_path: Path) -> Iterator[tuple[str, sqlite3.Connection]]:
    """A WAL database and a writer on it that never checkpoints by itself."""
    path = str(tmp_path / "wal.db")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE t (x BLOB)")
    try:
        yield path, writer
    finally:
        writer.close()


def until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether ``condition`` came true within ``seconds`` (a bound, not a measurement)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def log_pages(path: str) -> tuple[int, int]:
    """(pages in the log, pages of it copied into the file), read without copying."""
    with contextlib.closing(sqlite3.connect(path)) as probe:
        # A PASSIVE checkpoint of nothing new reports the log's state; here the
        # checkpointer has copied everything, so this copies nothing more.
        _, log, copied = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(log), int(copied)


def test_a_round_copies_the_log_and_a_long_log_starts_over(tmp_path: Path) -> None:
    with wal_file(tmp_path) as (path, writer):
        for _ in range(40):
            writer.execute("INSERT INTO t VALUES (randomblob(4000))")
        checkpointer = Checkpointer(lambda: checkpoint_connection(path), restart_pages=1000)
        with contextlib.closing(checkpoint_connection(path)) as connection:
            checkpointer.checkpoint(connection)
            assert (checkpointer.checkpoints, checkpointer.restarts) == (1, 0)
            log, copied = log_pages(path)
            assert log >= 40
            assert copied == log
            # A log longer than restart_pages: RESTART, and the next write starts the
            # log over from its beginning instead of growing it.
            short = Checkpointer(lambda: checkpoint_connection(path), restart_pages=10)
            short.checkpoint(connection)
            assert short.restarts == 1
            writer.execute("INSERT INTO t VALUES (randomblob(10))")
            assert log_pages(path)[0] < 10


def test_the_thread_checkpoints_after_writes_and_stops_on_close(tmp_path: Path) -> None:
    with wal_file(tmp_path) as (path, writer):
        checkpointer = Checkpointer(lambda: checkpoint_connection(path), interval_s=0.01)
        checkpointer.start()
        try:
            time.sleep(0.05)
            assert checkpointer.checkpoints == 0  # nothing written: no round, no connection
            writer.execute("INSERT INTO t VALUES (randomblob(4000))")
            checkpointer.written()
            assert until(lambda: checkpointer.checkpoints == 1)
        finally:
            checkpointer.close()
        assert "bridge-store-sqlite-checkpointer" not in {t.name for t in threading.enumerate()}


def test_a_failed_checkpoint_is_one_line_without_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with wal_file(tmp_path) as (path, _):
        broken = checkpoint_connection(path)
        broken.close()
        checkpointer = Checkpointer(lambda: checkpoint_connection(path))
        with caplog.at_level(logging.WARNING, logger="bridge_store_sql.sqlite_checkpoints"):
            checkpointer.checkpoint(broken)
        assert [r.getMessage() for r in caplog.records] == [
            "SQLite WAL checkpoint failed (ProgrammingError); the next one tries again"
        ]
        assert checkpointer.checkpoints == 0


async def test_the_database_checkpoints_its_writes_and_stops_the_thread_on_close(
    tmp_path: Path,
) -> None:
    db = SqliteDatabase(SqliteSettings(path=tmp_path / "store.db"))
    await db.start()
    checkpointer = db._checkpointer
    assert checkpointer is not None
    try:

        def create(session: object) -> None:
            session.driver.execute("CREATE TABLE t (x BLOB)")  # type: ignore[attr-defined]

        await db.write(create, what="test.create", atomic=True, retry=False)
        assert await asyncio.to_thread(until, lambda: checkpointer.checkpoints >= 1)
    finally:
        await db.close()
    assert "bridge-store-sqlite-checkpointer" not in {t.name for t in threading.enumerate()}
