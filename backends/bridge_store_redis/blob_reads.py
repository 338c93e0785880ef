"""Reading a checkpoint blob in pieces when it is large, so no read holds the loop.

A ``GET`` of an 80 MiB blob is one reply: Redis copies the whole value into the
connection's output buffer at once (its other clients wait meanwhile), and redis-py
collects the reply in its parser's buffer before it makes one ``bytes`` of it on the
event loop (2x the blob per get). So a blob larger than :data:`LARGE_BLOB_BYTES` is
read :data:`PIECE_BYTES` at a time with ``GETRANGE``, :data:`IN_FLIGHT` pieces asked
for ahead, each written into one ``BytesIO`` as it comes (a millisecond's copy) and
dropped; the ``BytesIO``'s buffer then becomes the answer without another copy
(CPython hands over a buffer nobody else holds), so a get takes about 1x the blob.
Smaller blobs are answered whole by one script (``READ_BLOB``), which also tells a
large blob's length, so a small get is still one round trip.

Every piece must be of one version of the blob: an update (or a delete and a create)
between two pieces would otherwise answer half of each. The pieces are read on one
connection after ``WATCH`` of the blob's key and followed by an empty ``MULTI``/``EXEC``:
``EXEC`` answers nil if any write touched the key since the ``WATCH``, and then the
pieces are thrown away and read again. A blob rewritten during each of
:data:`ATTEMPTS` reads is read whole with one ``GET`` (atomic, and as slow on the loop
as before): a blob rewritten that often is not the bridge's pattern. Nothing is stored
differently, so stores written before need no change.

The ``WATCH`` session runs on a connection this module holds: the pool's (standalone)
or the slot's primary's (:meth:`.cluster.BoundedCluster.connection_to`). redis-py's
own transactions would do the same on a standalone Redis, but its cluster pipeline
resolves each watched command's slot on a private event loop in a thread the calling
loop waits for; one session of plain commands serves both. In a cluster, a slot that
moves during the read (``MOVED``, ``ASK``, ``TRYAGAIN``) ends the session and the blob is
read with the client's own ``GET``, which follows the slot. A session that ends early
(an error, a cancelled call) closes its connection: replies to pieces asked for ahead
may still be on their way, and the next user would read them as its own.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import Enum
from typing import Any, Literal, cast

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AskError, TryAgainError

from .cluster import BoundedCluster
from .scripts import Scripts

#: Blobs above this are read in pieces.
LARGE_BLOB_BYTES = 1024 * 1024
#: Bytes per GETRANGE: a few milliseconds of parsing on the loop each.
PIECE_BYTES = 1024 * 1024
#: GETRANGEs sent before the first of them is answered: the network and Redis work
#: while a piece is parsed, and Redis's output buffer holds at most this many pieces.
IN_FLIGHT = 2
#: Reads in pieces tried before the blob is read whole.
ATTEMPTS = 3


class _Outcome(Enum):
    #: The blob was written while its pieces were read: they may be of two versions.
    CHANGED = "changed"


_Read = bytes | None | Literal[_Outcome.CHANGED]


async def read_blob(client: Redis | RedisCluster, scripts: Scripts, key: bytes) -> bytes | None:
    """The blob at ``key``, or None if there is none."""
    found = await scripts.read_blob(keys=[key], args=[LARGE_BLOB_BYTES])
    if not isinstance(found, int):
        return cast("bytes | None", found)
    if isinstance(client, BoundedCluster) or not isinstance(client, RedisCluster):
        for _ in range(ATTEMPTS):
            try:
                async with _connection(client, key) as connection:
                    read = await _watched_read(connection, key)
            except (AskError, TryAgainError):
                break  # the slot moved: the client's GET follows it
            if read is not _Outcome.CHANGED:
                return read
    return cast("bytes | None", await client.get(key))


@asynccontextmanager
async def _connection(
    client: Redis | BoundedCluster, key: bytes
) -> AsyncIterator[AbstractConnection]:
    """A connection for one read's commands alone; closed if the read fails (replies
    may be left unread on it, and its ``WATCH``)."""
    if isinstance(client, BoundedCluster):
        async with client.connection_to(key) as held:
            yield held
        return
    pool = client.connection_pool
    connection: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        yield connection
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)


async def _watched_read(connection: AbstractConnection, key: bytes) -> _Read:
    """The blob, of one version; None if it is gone; or CHANGED."""
    await _send(connection, ("WATCH", key), ("STRLEN", key))
    await connection.read_response()
    size = int(await connection.read_response())
    blob: bytes | None
    if size <= LARGE_BLOB_BYTES:
        # Smaller now (or gone): one GET is one version.
        await _send(connection, ("GET", key))
        blob = await connection.read_response()
    else:
        blob = await _pieces(connection, key, size)
    await _send(connection, ("MULTI",), ("EXEC",))
    await connection.read_response()
    if await connection.read_response() is None:
        return _Outcome.CHANGED
    return blob


async def _pieces(connection: AbstractConnection, key: bytes, size: int) -> bytes:
    starts = range(0, size, PIECE_BYTES)
    whole = io.BytesIO()
    for start in starts[:IN_FLIGHT]:
        await _send(connection, ("GETRANGE", key, start, start + PIECE_BYTES - 1))
    for number in range(len(starts)):
        # A piece shorter than asked (the blob was cut short) is caught by EXEC too.
        whole.write(await connection.read_response())
        if number + IN_FLIGHT < len(starts):
            start = starts[number + IN_FLIGHT]
            await _send(connection, ("GETRANGE", key, start, start + PIECE_BYTES - 1))
    return whole.getvalue()


async def _send(connection: AbstractConnection, *commands: tuple[Any, ...]) -> None:
    await connection.send_packed_command(connection.pack_commands(commands))
