"""Leases without a table: a lock the database (or the OS) drops with its holder.

- Postgres: a session advisory lock (``pg_try_advisory_lock``) on a connection kept
  out of the pool while the lease is held. Every server sharing the database contends
  for the same key; a server that dies loses its session, and with it the lock.
- SQLite: servers sharing a file share a machine, so an exclusive ``flock`` on a file
  next to the database (``<path>-lease-<name>``) is the lock; the OS drops it when the
  process dies. ``flock`` locks belong to an open file, so two stores opened in one
  process contend too.

Both are held by this process for as long as it lives, so the lease's ``seconds`` are
kept here: a timer frees the lock when the holder has not renewed it in time, as an
expiring lease row would, and a connection that died in the meantime has lost the lock
(a renewal checks, and takes it again if it can).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

from bridge_store.errors import unavailable

from . import errors
from .engine import Database
from .postgres import PostgresDatabase
from .sqlite import SqliteDatabase


def advisory_key(name: str) -> int:
    """The advisory lock key of lease ``name``: 8 bytes of a hash, as a signed bigint."""
    digest = hashlib.sha1(f"bridge-store lease {name}".encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _Lock(Protocol):
    async def alive(self) -> bool:
        """Whether the lock is still ours."""

    async def free(self) -> None:
        """Give the lock up (never raises: a dead connection has given it up already)."""


class _AdvisoryLock:
    def __init__(self, connection: Any, key: int) -> None:
        self._connection = connection
        self._key = key

    async def alive(self) -> bool:
        try:
            await self._connection.scalar(sa.select(1))
        except Exception:
            return False
        return True

    async def free(self) -> None:
        with contextlib.suppress(Exception):
            await self._connection.scalar(sa.select(sa.func.pg_advisory_unlock(self._key)))
        with contextlib.suppress(Exception):
            await self._connection.close()


async def _advisory_lock(db: PostgresDatabase, name: str) -> _Lock | None:
    key = advisory_key(name)
    try:
        connection = await db.engine.connect()
    except Exception as error:
        errors.reraise(error, "taking a lease")
    try:
        taken = await connection.scalar(sa.select(sa.func.pg_try_advisory_lock(key)))
    except Exception as error:
        with contextlib.suppress(Exception):
            await connection.close()
        errors.reraise(error, "taking a lease")
    if not taken:
        await connection.close()
        return None
    return _AdvisoryLock(connection, key)


class _FileLock:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def alive(self) -> bool:
        return True

    async def free(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _file_lock(path: Path) -> _Lock | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        raise unavailable(f"cannot open the lease file {path}: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return _FileLock(fd)


@dataclass
class _Held:
    holder: str
    lock: _Lock
    expiry: asyncio.TimerHandle | None = None


class SqlLeases:
    """The leases this process holds on one database."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: dict[str, _Held] = {}
        self._expiring: set[asyncio.Task[None]] = set()

    async def acquire(self, name: str, holder: str, seconds: float) -> bool:
        held = self._held.get(name)
        if held is not None:
            if held.holder != holder:
                return False
            if await held.lock.alive():
                self._expire_after(seconds, name, held)
                return True
            await self._drop(name, held)  # the connection died, and the lock with it
        lock = await self._take(name)
        if lock is None:
            return False
        held = self._held[name] = _Held(holder, lock)
        self._expire_after(seconds, name, held)
        return True

    async def release(self, name: str, holder: str) -> None:
        held = self._held.get(name)
        if held is not None and held.holder == holder:
            await self._drop(name, held)

    async def close(self) -> None:
        for name, held in list(self._held.items()):
            await self._drop(name, held)

    async def _take(self, name: str) -> _Lock | None:
        db = self._db
        if isinstance(db, PostgresDatabase):
            return await _advisory_lock(db, name)
        assert isinstance(db, SqliteDatabase)  # the two dialects there are
        return _file_lock(Path(f"{db.settings.path}-lease-{name}"))

    async def _drop(self, name: str, held: _Held) -> None:
        if held.expiry is not None:
            held.expiry.cancel()
        if self._held.get(name) is held:
            del self._held[name]
        await held.lock.free()

    def _expire_after(self, seconds: float, name: str, held: _Held) -> None:
        """Free ``held`` in ``seconds`` unless renewed before."""

        def expire() -> None:
            task = asyncio.get_running_loop().create_task(self._drop(name, held))
            self._expiring.add(task)  # a reference, so the task is not collected early
            task.add_done_callback(self._expiring.discard)

        if held.expiry is not None:
            held.expiry.cancel()
        held.expiry = asyncio.get_running_loop().call_later(seconds, expire)
