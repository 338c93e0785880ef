"""Large answers (checkpoint blobs) encoded off the event loop, a piece at a time.

A ``checkpoints.get`` of an 80 MiB blob was answered by building the whole body on the
loop: the base64 text (180 ms), its join (70 ms) and the JSON (56 ms), each one C call
that keeps the GIL, so a small call meanwhile waited 300-560 ms, and the blob, its
text, the joined text and the body were all alive at once (0.8-0.9 GiB with two
readers). Here such an answer is never built whole:

- the handler hands back the blob itself, wrapped in a :class:`BlobAnswer`, in place of
  its base64 text (``dispatch``; blobs of :data:`LARGE_ANSWER_BYTES` or less are
  answered as before);
- the codec writes everything around the text (JSON: the codec's own output with a
  placeholder, cut there; protobuf: the field tags and lengths, computed, since a
  length-delimited message cannot be cut the same way);
- the text is encoded on one worker thread, :data:`PIECE_BYTES` of blob at a time
  (a couple of milliseconds of GIL each, so the loop gets it back between pieces),
  one piece ahead of the one being sent, and sent as it comes (ASGI ``more_body``),
  with ``Content-Length`` known beforehand. The server's flow control holds the next
  piece until the client has taken the last, so an answer holds the blob and a few
  pieces, whatever the client's speed.

No gzip: blobs are base64 of encrypted bytes, not worth it (``dispatch.INCOMPRESSIBLE``).
"""

from __future__ import annotations

import asyncio
import binascii
import logging
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.protobuf import struct_pb2
from starlette.types import Send

from ..errors import Code, ConnectError
from ..failures import log_failure
from ..types import Document
from ._codecs import LARGE_BODY_BYTES, Codec, JsonCodec, ProtoCodec
from .replies import Reply, error_response

logger = logging.getLogger(__name__)

#: Blobs larger than this are answered through :class:`StreamedReply`.
LARGE_ANSWER_BYTES = LARGE_BODY_BYTES
#: Blob bytes encoded per step (a multiple of 3, so the pieces join into the base64 of
#: the whole): 1 MiB of text, about 2 ms of one core.
PIECE_BYTES = 768 * 1024

# One thread: answers take turns a piece at a time, and the loop competes for the GIL
# with one worker rather than with one per answer (see wire/large_bodies.py).
_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bridge-store-large-answers")


class BlobAnswer:
    """A checkpoint's blob in an answer, where its base64 text will be."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    @property
    def text_length(self) -> int:
        return (len(self.blob) + 2) // 3 * 4

    def text(self) -> str:
        """The whole base64 text, for a caller in this process (not the server)."""
        return "".join(_piece(self.blob, start).decode("ascii") for start in self._starts())

    def _starts(self) -> range:
        return range(0, len(self.blob), PIECE_BYTES)


def blob_of(output: Document | None) -> BlobAnswer | None:
    """The blob an answer carries, if it is to be streamed."""
    if output is None:
        return None
    data = output.get("data")
    return data if isinstance(data, BlobAnswer) else None


def streamed(codec: Codec, output: Document | None) -> StreamedReply | Reply | None:
    """The reply sending ``output``'s blob piece by piece; None if it carries none
    (``internal`` if the codec cannot write the rest of it)."""
    blob = blob_of(output)
    if output is None or blob is None:
        return None
    try:
        return StreamedReply(codec, output, blob)
    except Exception as error:
        log_failure(logger, f"encoding a CallStore output as {codec.name}", error)
        return error_response(ConnectError(Code.INTERNAL, "internal error"))


def plain(output: Any) -> Any:
    """``output`` with a blob as its base64 text, as a client reads it."""
    blob = blob_of(output) if isinstance(output, dict) else None
    if blob is None:
        return output
    return {**output, "data": blob.text()}


def _piece(blob: bytes, start: int) -> bytes:
    return binascii.b2a_base64(memoryview(blob)[start : start + PIECE_BYTES], newline=False)


class StreamedReply:
    """A 200 whose body is a blob's answer, sent piece by piece (see the module)."""

    __slots__ = ("_blob", "_prefix", "_suffix", "body", "code", "headers", "status")

    def __init__(self, codec: Codec, output: Document, blob: BlobAnswer) -> None:
        self.status = 200
        self.code = "ok"
        self._blob = blob
        self._prefix, self._suffix = _framing(codec, output, blob.text_length)
        size = len(self._prefix) + blob.text_length + len(self._suffix)
        #: What the endpoint measures an answer by: this one's length.
        self.body = _Sized(size)
        self.headers = [
            (b"content-type", codec.media_type.encode("latin-1")),
            (b"content-length", b"%d" % size),
        ]

    async def send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self._prefix, "more_body": True})
        loop = asyncio.get_running_loop()
        blob = self._blob.blob
        ahead: asyncio.Future[bytes] | None = None
        for start in self._blob._starts():
            # The next piece is encoded on the worker while this one is sent.
            encoding = loop.run_in_executor(_worker, _piece, blob, start)
            if ahead is not None:
                await send({"type": "http.response.body", "body": await ahead, "more_body": True})
            ahead = encoding
        if ahead is not None:
            await send({"type": "http.response.body", "body": await ahead, "more_body": True})
        await send({"type": "http.response.body", "body": self._suffix, "more_body": False})


class _Sized:
    """Stands for a body that is never built: only its length is asked."""

    __slots__ = ("_size",)

    def __init__(self, size: int) -> None:
        self._size = size

    def __len__(self) -> int:
        return self._size


def _framing(codec: Codec, output: Document, text_length: int) -> tuple[bytes, bytes]:
    """What goes before and after the blob's text in the body, in ``codec``."""
    if isinstance(codec, JsonCodec):
        # The codec writes the answer with a placeholder where the text goes: a run of
        # letters and digits, written as it is, found once.
        placeholder = f"bridgestoreblob{secrets.token_hex(16)}"
        body = codec.encode({**output, "data": placeholder})
        prefix, found, suffix = body.partition(placeholder.encode("ascii"))
        if not found or placeholder.encode("ascii") in suffix:
            raise RuntimeError("the JSON codec did not write the placeholder once")
        return prefix, suffix
    if isinstance(codec, ProtoCodec):
        return _proto_framing(output, text_length), b""
    raise TypeError(f"no streamed answer for the {codec.name} codec")


# Protobuf field keys: (field number << 3) | wire type 2 (length-delimited).
_OUTPUT = b"\x0a"  # CallStoreResponse.output
_FIELDS = b"\x0a"  # Struct.fields, one map entry each
_ENTRY_KEY = b"\x0a"  # the entry's key
_ENTRY_VALUE = b"\x12"  # the entry's Value
_STRING_VALUE = b"\x1a"  # Value.string_value


def _varint(number: int) -> bytes:
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _proto_framing(output: Document, text_length: int) -> bytes:
    """A ``CallStoreResponse`` up to the blob's text, which ends it.

    protobuf writes the other fields of ``output`` (its own ``Struct`` entries); the
    ``data`` entry, whose text is written later, gets its key and the lengths of the
    three messages around it here. The entries of a map may come in any order.
    """
    rest = struct_pb2.Struct()
    rest.update({key: value for key, value in output.items() if key != "data"})
    others = rest.SerializeToString()
    key = b"data"
    value = _STRING_VALUE + _varint(text_length)
    value_length = len(value) + text_length
    entry = _ENTRY_KEY + _varint(len(key)) + key + _ENTRY_VALUE + _varint(value_length) + value
    entry_length = len(entry) + text_length
    fields = others + _FIELDS + _varint(entry_length) + entry
    struct_length = len(fields) + text_length
    # Checked against the library's own encoding in tests/test_large_answer_loop.py.
    return _OUTPUT + _varint(struct_length) + fields
