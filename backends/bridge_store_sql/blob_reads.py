"""Reading a checkpoint blob, in pieces when it is large, so no read holds the loop.

A blob read whole is one long call that keeps the GIL: sqlite3 copies an 80 MiB value
out of its overflow pages into a ``bytes`` under the GIL (136-145 ms, measured with a
thread ticking every millisecond beside it), and asyncpg decodes a whole ``bytea`` row
on the event loop. Either way a small call meanwhile waited for it. So a blob larger
than :data:`LARGE_BLOB_BYTES` is read:

- on SQLite through the incremental blob API (``Connection.blobopen``), whose read
  lets go of the GIL while SQLite copies (21-23 ms of the GIL at most, same measure),
  within one read transaction, so the row found is the row read;
- on Postgres :data:`PIECE_BYTES` at a time (``substring``, which reads only the
  TOAST chunks it needs: blobs are stored uncompressed), each piece its own round trip
  so the loop runs between them, within one REPEATABLE READ transaction, so every
  piece is of one version of the blob; the pieces are joined on a thread.

Smaller blobs are read in one statement, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa
from sqlalchemy.util import await_only

from .statements import Session
from .tables import checkpoint_blobs as t

#: Blobs above this are read in pieces.
LARGE_BLOB_BYTES = 1024 * 1024
#: Bytes per Postgres round trip: a few milliseconds of asyncpg's decoding each.
PIECE_BYTES = 4 * 1024 * 1024

_KEY = (
    t.c.tenant == sa.bindparam("b_tenant"),
    t.c.agent_id == sa.bindparam("b_agent_id"),
    t.c.blob_id == sa.bindparam("b_blob_id"),
)
_GET = sa.select(t.c.data).where(*_KEY)
# SQLite and Postgres both know a stored value's length without reading it.
_SIZE = sa.select(sa.literal_column("rowid"), sa.func.length(t.c.data)).where(*_KEY)
_POSTGRES_SIZE = sa.select(sa.func.octet_length(t.c.data)).where(*_KEY)
_POSTGRES_PIECE = sa.select(
    sa.func.substring(t.c.data, sa.bindparam("b_from"), sa.bindparam("b_count"))
).where(*_KEY)


def read_blob(conn: Session, params: dict[str, Any]) -> bytes | None:
    """The blob ``params`` names (``b_tenant``, ``b_agent_id``, ``b_blob_id``), or None."""
    driver = getattr(conn, "driver", None)
    if conn.dialect.name == "sqlite" and driver is not None:
        return _sqlite(conn, driver, params)
    if conn.dialect.name == "postgresql" and driver is not None:
        return _postgres(conn, driver, params)
    data: bytes | None = conn.scalar(_GET, params)
    return data


def _sqlite(conn: Session, driver: Any, params: dict[str, Any]) -> bytes | None:
    # A reader's connection is in autocommit: the two statements share one snapshot
    # only inside a transaction (a row deleted in between could leave its rowid to
    # another blob).
    driver.execute("BEGIN")
    try:
        found = conn.execute(_SIZE, params).one_or_none()
        if found is None:
            return None
        rowid, size = found
        if size is None or size <= LARGE_BLOB_BYTES:
            data: bytes | None = conn.scalar(_GET, params)
            return data
        with driver.blobopen(t.name, "data", rowid, readonly=True) as blob:
            whole: bytes = blob.read()
        return whole
    finally:
        driver.execute("COMMIT")


def _postgres(conn: Session, driver: Any, params: dict[str, Any]) -> bytes | None:
    size = conn.scalar(_POSTGRES_SIZE, params)
    if size is None or size <= LARGE_BLOB_BYTES:
        data: bytes | None = conn.scalar(_GET, params)
        return data
    transaction = driver.transaction(isolation="repeatable_read", readonly=True)
    await_only(transaction.start())
    try:
        size = conn.scalar(_POSTGRES_SIZE, params)
        pieces = [
            conn.scalar(_POSTGRES_PIECE, {**params, "b_from": start + 1, "b_count": PIECE_BYTES})
            for start in range(0, size or 0, PIECE_BYTES)
        ]
    except BaseException:
        if not driver.is_closed():
            await_only(transaction.rollback())
        raise
    await_only(transaction.commit())
    if size is None:  # deleted since its size was read
        return None
    # On a thread: joining 80 MiB took 80-120 ms, on the loop's thread a stall, while
    # bytes.join lets go of the GIL for a copy that large (another thread ticking
    # every millisecond beside it waited at most 11 ms).
    whole: bytes = await_only(asyncio.to_thread(b"".join, pieces))
    del pieces
    return whole
