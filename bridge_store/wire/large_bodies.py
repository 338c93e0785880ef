"""Large request bodies (checkpoints) decoded off the event loop, in short steps.

A 100 MB checkpoint body decoded on the loop held it for over a second (UTF-8, the
JSON parse and the base64 decode are each one C call that never lets go of the GIL),
so every other call waited: six such uploads at once delayed a normal call by 3 s.
Here such a body is decoded on one worker thread, one body at a time, in steps that
each hold the GIL for a few milliseconds, so the loop gets it back between steps:

- runs of the base64 alphabet of at least :data:`LONG_STRING_BYTES` between quotes
  (the checkpoint's ``data``) are found block by block and cut out of the JSON, which
  leaves a small skeleton for the ordinary decoder;
- a checkpoint's ``input.data`` is base64-decoded here, piece by piece, into a
  :class:`DecodedBlob` that ``contract.take_blob`` takes as it is; any other long
  string becomes a ``str`` again, piece by piece;
- gzip is inflated here too (zlib lets go of the GIL while it inflates).

Only one body is decoded at a time: with six workers and the loop all wanting the GIL,
the loop would get it a seventh of the time; with one worker it gets it every switch.
A long string holding JSON escapes, or a body of many small values, is decoded by the
ordinary decoder on the worker (still off the loop's own steps).
"""

from __future__ import annotations

import asyncio
import binascii
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ._codecs import LARGE_BODY_BYTES, CallStoreCall, Codec, JsonCodec
from ._compression import gunzip

#: A string this long, of base64 characters only, is cut out of the JSON skeleton.
LONG_STRING_BYTES = 64 * 1024
#: Blocks scanned at a time; a run of LONG_STRING_BYTES always holds a whole block.
_BLOCK = LONG_STRING_BYTES // 2
#: Base64 characters decoded (or copied into a str) per step: a few milliseconds.
_PIECE = 64 * 1024
#: gzip bodies above this go to the worker: inflating one may take long.
GZIP_INLINE_MAX_BYTES = 4 * 1024
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
#: bytes.translate table: base64 characters become 1, every other byte 0.
_MARKS = bytes(1 if byte in _BASE64 else 0 for byte in range(256))
_QUOTE = 0x22
_BACKSLASH = 0x5C
#: The methods whose ``input.data`` is a blob in base64.
_BLOB_METHODS = frozenset({"create", "update"})

T = TypeVar("T")

# One thread: bodies are decoded one after the other (see the module's docstring).
_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bridge-store-large-bodies")


class DecodedBlob:
    """A checkpoint's blob, base64-decoded already; ``contract.take_blob`` unwraps it."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def is_large(received: int, encoding: str | None) -> bool:
    """Whether a body of ``received`` bytes in ``encoding`` is decoded on the worker."""
    if encoding == "gzip":
        return received > GZIP_INLINE_MAX_BYTES
    return received > LARGE_BODY_BYTES


async def decode(
    codec: Codec, body: bytes | bytearray, encoding: str | None, limit: int
) -> CallStoreCall:
    """``body`` decoded on the worker thread; what ``codec.decode`` would give."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_worker, _decode, codec, body, encoding, limit)


async def off_the_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the large bodies' one worker (sealing a large blob)."""
    return await asyncio.get_running_loop().run_in_executor(_worker, function, *args)


def _decode(
    codec: Codec, body: bytes | bytearray, encoding: str | None, limit: int
) -> CallStoreCall:
    if encoding == "gzip" and body:
        body = gunzip(body, limit)
    if len(body) <= LARGE_BODY_BYTES:
        return codec.decode(body)
    if not isinstance(codec, JsonCodec):
        return _with_blob(codec.decode(body), None)
    spans = long_strings(body)
    if not spans:
        return codec.decode(body)
    nonce = secrets.token_hex(16)
    skeleton = bytearray()
    view = memoryview(body)
    placeholders: dict[str, tuple[int, int]] = {}
    previous = 0
    for number, (start, end) in enumerate(spans):
        name = f"bridge-store-{nonce}-{number}"
        placeholders[name] = (start, end)
        skeleton += view[previous:start]
        skeleton += name.encode("ascii")
        previous = end
    skeleton += view[previous:]
    call = codec.decode(skeleton)
    del skeleton
    return _with_blob(call, (view, placeholders))


def long_strings(body: bytes | bytearray) -> list[tuple[int, int]] | None:
    """Where the long base64 strings of a JSON ``body`` are: (start, end) of each one's
    characters, quotes excluded. None when one is preceded by a backslash: an escaped
    quote may open no string at all, so the body is decoded the ordinary way.

    A quote not preceded by a backslash either opens a string or closes one; in the
    second case the characters after it are not JSON, and the skeleton stays invalid.
    """
    spans: list[tuple[int, int]] = []
    size = len(body)
    block = 0
    while block * _BLOCK < size:
        start = block * _BLOCK
        marks = body[start : start + _BLOCK].translate(_MARKS)
        if marks.find(0) >= 0 or len(marks) < _BLOCK:
            block += 1
            continue
        # A whole block of base64: find where its run begins and ends.
        before = body[max(0, start - _BLOCK) : start].translate(_MARKS)
        run_start = start - (len(before) - before.rfind(0) - 1)
        end = start + _BLOCK
        while end < size:
            marks = body[end : end + _BLOCK].translate(_MARKS)
            zero = marks.find(0)
            if zero >= 0:
                end += zero
                break
            end += len(marks)
        block = end // _BLOCK + 1
        if end - run_start < LONG_STRING_BYTES or end >= size or run_start < 1:
            continue
        if body[run_start - 1] != _QUOTE or body[end] != _QUOTE:
            continue  # base64 characters inside a longer string, or a long number
        if run_start >= 2 and body[run_start - 2] == _BACKSLASH:
            return None
        spans.append((run_start, end))
    return spans


def _with_blob(
    call: CallStoreCall, cut: tuple[memoryview, dict[str, tuple[int, int]]] | None
) -> CallStoreCall:
    """``call`` with the cut strings put back, and a checkpoint's data decoded."""
    data = call.input
    blob_field = (
        call.substore == "checkpoints"
        and call.method in _BLOB_METHODS
        and isinstance(data, dict)
        and "data" in data
    )
    if cut is not None:
        view, placeholders = cut
        if blob_field and isinstance(data["data"], str) and data["data"] in placeholders:
            start, end = placeholders.pop(data["data"])
            blob = _base64_decode(view[start:end])
            data["data"] = DecodedBlob(blob) if blob is not None else _text(view[start:end])
            blob_field = False
        if placeholders:
            _put_back(data, view, placeholders)
    if blob_field and isinstance(data["data"], str):
        blob = _base64_decode(data["data"])
        if blob is not None:
            data["data"] = DecodedBlob(blob)
    return call


def _base64_decode(text: memoryview | str) -> bytes | None:
    """``text`` decoded as strict base64, piece by piece; None if it is not valid.

    Pieces are multiples of 4 characters; padding may only end the last one, as strict
    decoding of the whole would require.
    """
    size = len(text)
    pieces: list[bytes] = []
    try:
        for start in range(0, size, _PIECE):
            piece = text[start : start + _PIECE]
            if start + _PIECE < size and _has_padding(piece):
                return None
            pieces.append(binascii.a2b_base64(piece, strict_mode=True))
    except (binascii.Error, ValueError):
        return None
    return b"".join(pieces)


def _has_padding(piece: memoryview | str) -> bool:
    if isinstance(piece, str):
        return "=" in piece
    return piece.tobytes().find(b"=") >= 0


def _text(characters: memoryview) -> str:
    """Base64 characters (ASCII) as a str, piece by piece."""
    return "".join(
        str(characters[start : start + _PIECE], "ascii")
        for start in range(0, len(characters), _PIECE)
    )


def _put_back(value: Any, view: memoryview, placeholders: dict[str, tuple[int, int]]) -> None:
    """Replace every placeholder left in ``value`` (keys included) by its string."""

    def restored(item: Any) -> Any:
        if isinstance(item, str) and item in placeholders:
            start, end = placeholders[item]
            return _text(view[start:end])
        return item

    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if any(key in placeholders for key in item):
                renamed = {restored(key): child for key, child in item.items()}
                item.clear()
                item.update(renamed)
            for key, child in item.items():
                item[key] = restored(child)
                stack.append(item[key])
        elif isinstance(item, list):
            for index, child in enumerate(item):
                item[index] = restored(child)
                stack.append(item[index])
