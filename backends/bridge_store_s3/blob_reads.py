"""Reading a checkpoint blob's body as it streams in, so no read holds the event loop.

Collected whole (``bytes_async``), an 80 MiB body was then copied into one Python
``bytes`` on the loop, a copy that keeps the GIL (the loop held 107-125 ms beside two
such gets), while the download buffer stayed alive beside it (2x the blob per get). A
body larger than :data:`LARGE_BLOB_BYTES` is instead taken as it arrives,
:data:`PIECE_BYTES` or a little more at a time (obstore's stream hands each piece over
as a ``bytes`` of its own), each written into one ``BytesIO`` (a millisecond's copy)
and dropped; the ``BytesIO``'s buffer then becomes the answer without another copy
(CPython hands over a buffer nobody else holds), so a get takes about 1x the blob.

The pieces are of one version of the blob: they are the body of one GET, and S3 never
answers a GET with parts of two writes, so an update while the body streams leaves
this read with the version it began with (tests/test_blob_read_races.py). Smaller
bodies are read whole, as before.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obstore import GetResult

#: Bodies above this are read as they stream in.
LARGE_BLOB_BYTES = 1024 * 1024
#: The least a piece holds (the last may hold less): well under a millisecond to copy.
PIECE_BYTES = 1024 * 1024


async def read_body(result: GetResult) -> bytes:
    """The body of a GET's ``result``, as one ``bytes``."""
    if result.meta["size"] <= LARGE_BLOB_BYTES:
        return bytes(await result.bytes_async())
    whole = io.BytesIO()
    async for piece in result.stream(min_chunk_size=PIECE_BYTES):
        whole.write(piece)
    return whole.getvalue()
