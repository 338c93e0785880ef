"""gzip for Connect unary bodies: bounded decompression and response negotiation."""

from __future__ import annotations

import asyncio
import gzip
import zlib

from ..errors import Code, ConnectError, invalid_argument

#: Responses smaller than this go out uncompressed (``serve --gzip-min-bytes``). A store
#: usually sits on loopback (a sidecar) or a fast LAN, where gzip costs more time than
#: the bytes it saves take to send: under the load bench's realistic mix gzip of list
#: pages of a few KB was 13% of the server's CPU. Stores reached over slow links can
#: lower it; 0 turns compression off.
DEFAULT_COMPRESS_MIN_BYTES = 64 * 1024
#: Responses larger than this go out uncompressed too. They are checkpoint blobs:
#: base64 of encrypted bytes, which gzip shrinks by under a quarter at a few tens of
#: MB/s of one core (docs/connect.md), slower than sending them plain on any LAN.
COMPRESS_MAX_BYTES = 8 * 1024 * 1024
#: Compressing more than this moves to a worker thread. zlib releases the GIL, so the
#: event loop keeps serving other requests in the meantime.
COMPRESS_INLINE_MAX_BYTES = 256 * 1024
#: Level 1: on a page of the recorded bridge documents it used about 60% of level 6's
#: CPU for a 35% larger output (see docs/connect.md). CPU is the scarcer resource, and
#: a store sits on loopback or a LAN.
COMPRESS_LEVEL = 1
_GZIP_WBITS = 31  # zlib: expect a gzip header and trailer


def too_large(limit: int) -> ConnectError:
    return ConnectError(Code.RESOURCE_EXHAUSTED, f"request body exceeds {limit} bytes")


def gunzip(data: bytes | bytearray, limit: int) -> bytes:
    """Decompress a gzip body, never producing more than ``limit`` bytes.

    ``max_length`` stops zlib as soon as the output passes the limit, so a small
    "gzip bomb" cannot inflate into memory. Concatenated members are accepted, as
    ``gzip.decompress`` does.
    """
    parts: list[bytes] = []
    total = 0
    remaining = data
    try:
        while True:
            inflater = zlib.decompressobj(wbits=_GZIP_WBITS)
            chunk = inflater.decompress(remaining, limit + 1 - total)
            total += len(chunk)
            if total > limit:
                raise too_large(limit)
            parts.append(chunk)
            if not inflater.eof:
                raise invalid_argument("gzip request body is truncated")
            remaining = inflater.unused_data
            if not remaining:
                return b"".join(parts)
    except zlib.error:
        raise invalid_argument("request body is not valid gzip") from None


def should_compress(size: int, accept_encoding: str, min_bytes: int) -> bool:
    """Whether to gzip a response of ``size`` bytes (``min_bytes`` 0: never)."""
    return 0 < min_bytes <= size <= COMPRESS_MAX_BYTES and accepts_gzip(accept_encoding)


async def compress(data: bytes) -> bytes:
    if len(data) > COMPRESS_INLINE_MAX_BYTES:
        return await asyncio.to_thread(_gzip, data)
    return _gzip(data)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=COMPRESS_LEVEL, mtime=0)


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` value allows gzip (``q=0`` refuses it)."""
    wildcard = False
    for entry in accept_encoding.split(","):
        coding, _, params = entry.partition(";")
        coding = coding.strip().lower()
        if coding not in ("gzip", "*"):
            continue
        quality = _quality(params)
        if coding == "gzip":
            return quality > 0
        wildcard = quality > 0
    return wildcard


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0
