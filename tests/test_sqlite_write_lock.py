"""SQLite writers wait for the write lock themselves, asking every half millisecond up
to the busy timeout, instead of through SQLite's busy handler, whose sleeps grow to
100 ms: two processes writing one file (``serve --workers 2``, two sidecars) kept a
waiting writer out for 1.8 s at the 99th percentile under load (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc as sa_exc

from bridge_store.errors import ConnectError
from bridge_store_sql import connections
from bridge_store_sql.settings import SqliteSettings
from bridge_store_sql.sqlite import SqliteDatabase


def busy_error(directory: Path) -> sa_exc.OperationalError:
    """A real SQLITE_BUSY, as SQLAlchemy wraps it: a writer against a held write lock."""
    path = directory / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        waiter.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        return sa_exc.OperationalError("BEGIN IMMEDIATE", None, error)
    finally:
        waiter.close()
        holder.close()
    raise AssertionError("the held write lock did not make BEGIN IMMEDIATE busy")


def test_a_busy_begin_is_asked_again_until_it_gets_the_lock(tmp_path: Path) -> None:
    busy = busy_error(tmp_path)
    tries: list[int] = []

    def begin() -> None:
        tries.append(1)
        if len(tries) < 4:
            raise busy

    connections.begin_immediate(begin, busy_timeout_ms=5000)
    assert len(tries) == 4


def test_a_lock_held_past_the_busy_timeout_raises_the_last_busy_error(tmp_path: Path) -> None:
    busy = busy_error(tmp_path)
    tries: list[int] = []

    def begin() -> None:
        tries.append(1)
        raise busy

    # A zero timeout is one try: the loop's own write connection.
    with pytest.raises(sa_exc.OperationalError) as raised:
        connections.begin_immediate(begin, busy_timeout_ms=0)
    assert raised.value is busy
    assert len(tries) == 1
    with pytest.raises(sa_exc.OperationalError):
        connections.begin_immediate(begin, busy_timeout_ms=20)
    assert len(tries) > 2


def test_any_other_error_is_raised_at_once(tmp_path: Path) -> None:
    tries: list[int] = []
    readonly = sa_exc.OperationalError(
        "BEGIN IMMEDIATE", None, sqlite3.OperationalError("attempt to write a readonly database")
    )

    def begin() -> None:
        tries.append(1)
        raise readonly

    with pytest.raises(sa_exc.OperationalError):
        connections.begin_immediate(begin, busy_timeout_ms=5000)
    assert len(tries) == 1


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    db = SqliteDatabase(SqliteSettings(path=tmp_path / "store.db", busy_timeout_ms=400))
    await db.start()

    def create(session: Any) -> None:
        session.driver.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")

    await db.write(create, what="test.create", atomic=True, retry=False)
    try:
        yield db
    finally:
        await db.close()


@contextlib.contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[None]:
    """Another connection (as another process would) holds the write lock for a while."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(seconds, holder.rollback)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        holder.close()


def insert(key: str) -> Any:
    def work(session: Any) -> None:
        session.driver.execute("INSERT INTO t (k) VALUES (?)", (key,))

    return work


async def test_a_write_waits_out_a_lock_shorter_than_the_busy_timeout(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    with write_lock_held(tmp_path / "store.db", 0.15):
        await database.write(insert("after"), what="agents.delete", atomic=False, retry=False)
    with contextlib.closing(sqlite3.connect(tmp_path / "store.db")) as reader:
        assert reader.execute("SELECT k FROM t").fetchall() == [("after",)]


async def test_a_lock_longer_than_the_busy_timeout_is_unavailable_not_a_hang(
    database: SqliteDatabase, tmp_path: Path
) -> None:
    with write_lock_held(tmp_path / "store.db", 30), pytest.raises(ConnectError) as raised:
        await database.write(insert("never"), what="agents.delete", atomic=False, retry=False)
    assert raised.value.code == "unavailable"
    assert "database busy" in str(raised.value)
