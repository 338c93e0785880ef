"""The Connect protocol for unary CallStore: headers, auth, body, codecs, errors.

Implements the server side of https://connectrpc.com/docs/protocol for the single
unary RPC bridge-store serves, as a plain ASGI app that the Starlette router mounts at
:data:`CALL_STORE_PATH` (the router answers 404 and 405). What happens here, in order:
bearer auth, ``Connect-Protocol-Version``, codec from ``Content-Type`` (415 with
``Accept-Post`` otherwise), ``Content-Encoding``, then, under the client's
``Connect-Timeout-Ms`` deadline, a bounded read of the body, decoding, the call and
the encoded (optionally gzipped) response. Every failure becomes a Connect error body.
See ``docs/connect.md`` for why this is hand-written rather than built on
``connectrpc``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from starlette.types import Message, Receive, Scope, Send

from ..errors import Code, ConnectError, invalid_argument
from ..failures import log_failure
from ..security.auth import Principal, TokenRegistry
from ..types import Answer, Document
from ..wire import large_answers, large_bodies
from ..wire._codecs import CODECS, LARGE_BODY_BYTES, Codec
from ..wire._compression import (
    DEFAULT_COMPRESS_MIN_BYTES,
    compress,
    gunzip,
    should_compress,
    too_large,
)
from ..wire.large_answers import StreamedReply
from ..wire.replies import Reply, error_response, unsupported_media_type
from ..workspaces import segment as workspace_segment
from ..workspaces.paths import Checkout

CALL_STORE_PATH = "/sdk.v1.SdkStoreCallbackService/CallStore"
PROTOCOL_VERSION = "1"
_PROTOCOL_VERSION_BYTES = PROTOCOL_VERSION.encode()
#: Request encodings understood; sent back in ``Accept-Encoding`` when one is not.
SUPPORTED_ENCODINGS = "gzip"
_MAX_TIMEOUT_DIGITS = 10  # the protocol's bound for Connect-Timeout-Ms

#: What serves a decoded call: (caller, substore, method, input, the checkout the
#: caller's store URL named or None) -> its answer (output None: null).
CallHandler = Callable[[Principal, Any, Any, Any, Checkout | None], Awaitable[Answer]]

#: A request's headers by lower-case name, as sent (latin-1 bytes).
RequestHeaders = dict[bytes, bytes]

#: Named for the module's old home: docs/connect.md names it to operators.
logger = logging.getLogger("bridge_store.connect")


class ClientDisconnected(Exception):
    """The client went away before its request body arrived: nobody is left to answer."""


class CallObserver(Protocol):
    """Told about each request: metrics, logs and traces (see :mod:`.observe`)."""

    def start(self, request_id_header: str | None) -> Any:
        """A request's headers are read; returns what the other two calls are given."""

    def named(self, observation: Any, substore: Any, method: Any, request_bytes: int) -> None:
        """Its body (``request_bytes`` as received) is decoded and names its call."""

    def finish(self, observation: Any, code: str, response_bytes: int) -> None:
        """Its answer is ready (``code``: ``ok`` or the Connect error code)."""


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> RequestHeaders:
    """A request's headers by name (ASGI servers lower-case names), values undecoded.

    A repeated header keeps its first value, as Starlette's ``Headers.get`` does: the
    dictionary is built from the last header to the first, in C. Values are decoded
    only where one is read as text, most of them on no call at all.
    """
    pairs = raw if isinstance(raw, list) else list(raw)
    return dict(reversed(pairs))


def bearer_principal(header: str | bytes | None, tokens: TokenRegistry) -> Principal | None:
    """Who an ``Authorization: Bearer <token>`` header stands for; None if nobody.

    ``header`` as sent (bytes) or decoded as latin-1 (Starlette's headers), which
    gives back the same bytes.
    """
    raw = header.encode("latin-1") if isinstance(header, str) else (header or b"")
    scheme, _, given = raw.partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    # The registry finds the token by its digest (see bridge_store.security.auth).
    return tokens.resolve(given.strip())


def codec_for(content_type: str) -> Codec | None:
    """The codec a unary ``Content-Type`` names; JSON must be UTF-8 if a charset is given."""
    media_type, _, params = content_type.partition(";")
    media_type = media_type.strip().lower()
    prefix = "application/"
    if not media_type.startswith(prefix):
        return None
    codec = CODECS.get(media_type[len(prefix) :])
    if codec is not None and codec.name == "json":
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
                "utf-8",
                "utf8",
            ):
                return None
    return codec


def timeout_seconds(header: bytes | None) -> float | None:
    """``Connect-Timeout-Ms`` in seconds; None when absent."""
    if header is None:
        return None
    value = header.decode("latin-1").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > _MAX_TIMEOUT_DIGITS:
        raise invalid_argument("Connect-Timeout-Ms must be a positive integer of at most 10 digits")
    return int(value) / 1000


def check_protocol_version(header: bytes | None) -> None:
    # Optional: the protocol lets servers require it, but curl users rarely send it.
    if header is None or header == _PROTOCOL_VERSION_BYTES:
        return
    if header.decode("latin-1").strip() != PROTOCOL_VERSION:
        raise invalid_argument(f"Connect-Protocol-Version must be {PROTOCOL_VERSION!r}")


def request_timeout(headers: RequestHeaders) -> float | None:
    """The call's deadline in seconds (None: none), once its protocol version is checked."""
    check_protocol_version(headers.get(b"connect-protocol-version"))
    deadline = headers.get(b"connect-timeout-ms")
    return None if deadline is None else timeout_seconds(deadline)


def request_encoding(content_encoding: bytes | None) -> str:
    """The body's ``Content-Encoding``, normalised; "identity" when absent."""
    return (content_encoding or b"identity").decode("latin-1").strip().lower()


async def read_body(
    receive: Receive, declared_length: bytes | None, limit: int
) -> bytes | bytearray:
    """The whole request body, refusing (without reading further) past ``limit`` bytes.

    A declared ``Content-Length`` over the limit is refused before reading anything;
    chunked bodies are counted as they arrive, so memory never exceeds the limit. A
    body that came in one piece, as every bridge call's does, is handed on as it came.
    """
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > limit:
        raise too_large(limit)
    message: Message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientDisconnected
    piece: bytes = message.get("body", b"")
    if len(piece) > limit:
        raise too_large(limit)
    if not message.get("more_body", False) and len(piece) <= LARGE_BODY_BYTES:
        return piece
    # Large bodies go into a bytearray, which the codec clears once it has read it:
    # a checkpoint body can be 100 MiB.
    body = bytearray(piece)
    del piece
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        body += message.get("body", b"")
        if len(body) > limit:
            raise too_large(limit)
    return body


#: How many distinct ``Content-Type`` values an endpoint remembers the codec of.
_KNOWN_CONTENT_TYPES = 32
_UNSEEN: Any = object()
_GZIPPED = {"content-encoding": "gzip"}


class CallStoreEndpoint:
    """The ASGI app answering ``POST /sdk.v1.SdkStoreCallbackService/CallStore``.

    Plain ASGI rather than a Starlette endpoint: every streamed agent message is one
    call, and Starlette's Request, Headers and Response objects cost about a third of
    the per-call CPU on the hot path (bench/, docs/connect.md). For the same reason
    the common case takes the short way through each step: no deadline, no encoding
    header, a body in one piece, a ``Content-Type`` seen before.
    """

    def __init__(
        self,
        handler: CallHandler,
        *,
        tokens: TokenRegistry,
        max_request_bytes: int,
        compress_min_bytes: int = DEFAULT_COMPRESS_MIN_BYTES,
        observer: CallObserver | None = None,
    ) -> None:
        self._handler = handler
        self._observer = observer
        self._tokens = tokens
        self._limit = max_request_bytes
        self._compress_min_bytes = compress_min_bytes
        #: The codec of each ``Content-Type`` value seen (None: no codec takes it).
        #: Clients send one of a handful; a client sending new ones each time only
        #: stops being remembered.
        self._codecs: dict[bytes, Codec | None] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # One coroutine down to the body's read and the call: every step that needs no
        # await is a plain method, since each coroutine layer costs every call about
        # 0.3 us of a memory-backend call's 40 (bench cpu-per-call).
        headers = request_headers(scope["headers"])
        observer = self._observer
        observation = None
        if observer is not None:
            request_id = headers.get(b"x-request-id")
            observation = observer.start(
                None if request_id is None else request_id.decode("latin-1")
            )
        reply: Reply | StreamedReply | None = None
        try:
            admitted = self._admit(headers)
            if isinstance(admitted, Reply):
                reply = admitted
            else:
                principal, codec, encoding = admitted
                try:
                    checkout = workspace_segment.checkout_in(scope)
                    timeout = request_timeout(headers)
                    call = self._read_and_call(
                        principal, codec, headers, receive, encoding, observation, checkout
                    )
                    if timeout is None:
                        output, compressible = await call
                    else:
                        output, compressible = await self._within(timeout, call)
                except ConnectError as error:
                    reply = error_response(error)
                else:
                    # Only a checkpoint's answer is incompressible, and it may hold a blob
                    # to send piece by piece: every other call skips the check.
                    streamed = None if compressible else large_answers.streamed(codec, output)
                    if streamed is not None:
                        reply = streamed
                    else:
                        reply = await self._answer(codec, output, compressible, headers)
        except ClientDisconnected:
            pass  # nobody is left to answer
        except Exception as error:
            # A bug in this layer: still a Connect error, never a text/plain 500.
            log_failure(logger, "CallStore request handling", error)
            reply = error_response(ConnectError(Code.INTERNAL, "internal error"))
        finally:
            if observer is not None:
                if reply is None:  # the client went away, or this task was cancelled
                    observer.finish(observation, Code.CANCELED.value, 0)
                else:
                    observer.finish(observation, reply.code, len(reply.body))
        if reply is None:
            return
        if observation is not None:
            reply.headers.append((b"x-request-id", observation.request_id.encode("latin-1")))
        await reply.send(send)

    def _admit(self, headers: RequestHeaders) -> tuple[Principal, Codec, str | None] | Reply:
        """Who calls, the body's codec and encoding; or the refusal to send instead."""
        principal = bearer_principal(headers.get(b"authorization"), self._tokens)
        if principal is None:
            return error_response(
                ConnectError(Code.UNAUTHENTICATED, "missing or invalid bearer token"),
                {"www-authenticate": "Bearer"},
            )
        content_type = headers.get(b"content-type", b"")
        codec = self._codecs.get(content_type, _UNSEEN)
        if codec is _UNSEEN:
            codec = self._codec(content_type)
        if codec is None:
            return unsupported_media_type(content_type.decode("latin-1"))
        encoding = None
        content_encoding = headers.get(b"content-encoding")
        if content_encoding is not None:
            encoding = request_encoding(content_encoding)
            if encoding not in ("identity", "gzip"):
                # The protocol asks for unimplemented, naming what is supported.
                return error_response(
                    ConnectError(
                        Code.UNIMPLEMENTED, f"unsupported Content-Encoding {encoding[:40]!r}"
                    ),
                    {"accept-encoding": SUPPORTED_ENCODINGS},
                )
        return principal, codec, encoding

    def _codec(self, content_type: bytes) -> Codec | None:
        """The codec of a ``Content-Type`` not seen before, remembered while there is room."""
        codec = codec_for(content_type.decode("latin-1"))
        if len(self._codecs) < _KNOWN_CONTENT_TYPES:
            self._codecs[content_type] = codec
        return codec

    async def _answer(
        self,
        codec: Codec,
        output: Document | None,
        compressible: bool,
        headers: RequestHeaders,
    ) -> Reply:
        """The answer carrying ``output``, gzipped if it is worth it and the client may."""
        reply = self._encoded(codec, output)
        minimum = self._compress_min_bytes
        # Most answers are under the threshold: that is found without a call
        # (should_compress refuses a threshold of 0, "never").
        if (
            compressible
            and len(reply.body) >= minimum
            and reply.code == "ok"
            and should_compress(
                len(reply.body), headers.get(b"accept-encoding", b"").decode("latin-1"), minimum
            )
        ):
            reply = Reply(200, await compress(reply.body), codec.media_type, _GZIPPED)
        return reply

    @staticmethod
    def _encoded(codec: Codec, output: Document | None) -> Reply:
        """The answer carrying ``output``; ``internal`` if the codec cannot write it."""
        try:
            return Reply.ok(codec.encode(output), codec.media_type)
        except Exception as error:
            log_failure(logger, f"encoding a CallStore output as {codec.name}", error)
            return error_response(ConnectError(Code.INTERNAL, "internal error"))

    @staticmethod
    async def _within(seconds: float, call: Awaitable[Answer]) -> Answer:
        """:meth:`_read_and_call` under the client's ``Connect-Timeout-Ms``."""
        try:
            async with asyncio.timeout(seconds) as deadline:
                return await call
        except TimeoutError:
            if not deadline.expired():
                raise
            raise ConnectError(Code.DEADLINE_EXCEEDED, "Connect-Timeout-Ms elapsed") from None

    async def _read_and_call(
        self,
        principal: Principal,
        codec: Codec,
        headers: RequestHeaders,
        receive: Receive,
        encoding: str | None,
        observation: Any,
        checkout: Checkout | None,
    ) -> Answer:
        body: bytes | bytearray = await read_body(
            receive, headers.get(b"content-length"), self._limit
        )
        received = len(body)
        if large_bodies.is_large(received, encoding):
            # Decoded on a worker in short steps: the loop keeps answering other calls.
            call = await large_bodies.decode(codec, body, encoding, self._limit)
        else:
            if encoding == "gzip" and body:
                # An empty body is an empty message whatever the encoding, as in connect-go.
                body = gunzip(body, self._limit)
            call = codec.decode(body)
        # Not kept while the store works: a checkpoint body can be 100 MiB.
        del body
        if self._observer is not None:
            self._observer.named(observation, call.substore, call.method, received)
        try:
            return await self._handler(principal, call.substore, call.method, call.input, checkout)
        except ConnectError:
            raise
        except Exception as error:
            # The failure is logged by its classes and stack, never its message or the
            # input (failures.py: they can carry documents, keys and blobs); the client
            # learns nothing about the backend.
            log_failure(logger, f"CallStore {call.substore!s:.40}.{call.method!s:.40}", error)
            raise ConnectError(Code.INTERNAL, "internal error") from None
