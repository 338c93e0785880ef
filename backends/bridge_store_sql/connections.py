"""How SQL connections are opened and kept: the SQLite file, WAL, Postgres sockets.

Kept apart from :mod:`.engine` (which decides how work runs on the connections) so
each stays small: what happens when a file is created or a socket goes quiet.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bridge_store.errors import ConfigurationError

logger = logging.getLogger(__name__)

#: What a connection that may not wait gets when another holds a lock.
SQLITE_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(error: sa.exc.DBAPIError) -> bool:
    """Whether SQLite refused ``error``'s statement because another connection holds
    a lock (not for anything the statement itself did)."""
    return getattr(error.orig, "sqlite_errorcode", None) in SQLITE_BUSY_CODES


def enable_wal(cursor: Any, busy_timeout_ms: int) -> None:
    """Switch the file to WAL, waiting up to the busy timeout for other connections.

    The switch needs an exclusive lock, and while another connection holds any lock
    on a rollback-journal file (one another tool created, or a new file several
    processes open at once) SQLite answers "database is locked" at once, without
    calling the busy handler. So the wait is done here. This runs in the driver's
    worker thread, never on the event loop.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as error:
            if "database is locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


#: How often a writer that found the write lock taken asks for it again.
WRITE_LOCK_POLL_SECONDS = 0.0005


def begin_immediate(begin: Callable[[], object], busy_timeout_ms: int) -> None:
    """Run ``begin`` (a ``BEGIN IMMEDIATE``) until it gets the write lock, at most the
    busy timeout; the last "database is locked" is raised after that.

    The writer connections have no busy handler of their own (busy_timeout 0), so the
    wait is done here: SQLite's handler sleeps 1, 2, 5, 10 ... 100 ms between tries,
    and a writer in another process that commits every few milliseconds kept a
    waiting one out for 1.8 s at the 99th percentile (``bench load`` on SQLite with
    ``serve --workers 2``); asking every half millisecond it waits about as long as
    the other's transaction. Once ``BEGIN IMMEDIATE`` holds the lock, a WAL
    transaction needs no other lock: its statements and commit never wait.
    Runs on a writer thread, or on the loop only with a zero timeout (one try).
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            begin()
            return
        except sa.exc.OperationalError as error:
            if not is_busy(error) or time.monotonic() >= deadline:
                raise
        time.sleep(WRITE_LOCK_POLL_SECONDS)


def prepare_sqlite_file(path: Path) -> None:
    """Create the database file 0600 if it is new; warn if an existing one is readable.

    The file holds every agent's ``sdkMetadata.blobEncryptionKey``. SQLite would create
    it with the process umask (usually 0644) and gives the -wal and -shm files the
    database's own mode, so the three are the owner's alone when the file starts out
    so. An existing file's mode is the operator's to change, not the server's.
    """
    for parent in (path.parent, *path.parent.parents):
        # mkdir would call a file on the way "existing" (FileExistsError), and the
        # open below would then fail with NotADirectoryError: name the culprit.
        if parent.exists() and not parent.is_dir():
            raise ConfigurationError(
                f"cannot create the SQLite database {path}: {parent} is a file, not a "
                "directory; choose another path (sqlite:///PATH)"
            )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if not path.is_file():
            raise ConfigurationError(
                f"the SQLite database {path} is not a file; choose another path (sqlite:///PATH)"
            ) from None
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            logger.warning(
                "SQLite database %s can be read by other users (mode %s) and holds every "
                "agent's blobEncryptionKey: chmod 600 %s",
                path,
                oct(mode)[2:],
                path,
            )
        return
    except OSError as error:
        raise ConfigurationError(
            f"cannot create the SQLite database {path}: {error.strerror}: choose a place "
            "this user may write (sqlite:///PATH), or change the directory's permissions"
        ) from None
    os.close(descriptor)


def keep_alive(connection: Any, options: dict[int, int]) -> None:
    """TCP keepalives and a user timeout on an asyncpg connection's socket.

    asyncpg has no setting for them (libpq's ``keepalives_*`` are not read); its
    transport is the only way to the socket. Without them, a pooled connection to a
    database cut off by a partition looks alive until a statement times out on it.
    """
    transport = getattr(connection, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:  # a Unix socket, or an asyncpg that keeps it elsewhere
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in options.items():
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:
        return  # not TCP (a Unix socket): nothing to keep alive


def install_pool_hooks(engine: sa.Engine) -> None:
    """The Postgres pool's two hooks: drop connections found closed, and timed-out ones."""

    @sa.event.listens_for(engine, "checkout")
    def drop_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # A connection the server (or a pooler) closed while it sat in the pool is
        # already known to be closed locally; raising here makes the pool replace
        # it before anything is sent, without a pre-ping round trip.
        if dbapi_connection.driver_connection.is_closed():
            raise sa.exc.DisconnectionError("connection closed while idle")

    @sa.event.listens_for(engine, "handle_error")
    def abandon_timed_out(context: sa.engine.ExceptionContext) -> None:
        # A statement that timed out leaves its connection unusable, and SQLAlchemy
        # then closes it politely, waiting for the server to answer once more: a
        # whole extra timeout when the server is cut off. Nothing more is owed to
        # it: drop the socket, so the call fails after one timeout, not two.
        fairy = context.connection.connection if context.connection is not None else None
        if isinstance(context.original_exception, TimeoutError) and fairy is not None:
            driver = fairy.driver_connection
            if driver is not None:
                driver.terminate()
            context.is_disconnect = True
