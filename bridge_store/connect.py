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
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._codecs import CODECS, CallStoreCall, Codec
from ._compression import compress, gunzip, should_compress, too_large
from .errors import Code, ConnectError, invalid_argument
from .types import Document

CALL_STORE_PATH = "/sdk.v1.SdkStoreCallbackService/CallStore"
PROTOCOL_VERSION = "1"
#: Sent with 415, as the Connect protocol asks, to name the codecs this server speaks.
ACCEPT_POST = "application/json, application/proto"
#: Request encodings understood; sent back in ``Accept-Encoding`` when one is not.
SUPPORTED_ENCODINGS = "gzip"
_MAX_TIMEOUT_DIGITS = 10  # the protocol's bound for Connect-Timeout-Ms

#: What serves a decoded call: (substore, method, input) -> output, or None for null.
CallHandler = Callable[[Any, Any, Any], Awaitable[Document | None]]

logger = logging.getLogger(__name__)


def error_response(error: ConnectError, headers: dict[str, str] | None = None) -> Response:
    """A Connect unary error: JSON ``{"code", "message"}`` with the code's HTTP status.

    Errors are JSON whatever codec the request used, as the protocol specifies.
    """
    body = json.dumps({"code": error.code.value, "message": error.message})
    return Response(
        body, status_code=error.code.http_status, media_type="application/json", headers=headers
    )


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


def timeout_seconds(header: str | None) -> float | None:
    """``Connect-Timeout-Ms`` in seconds; None when absent."""
    if header is None:
        return None
    value = header.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > _MAX_TIMEOUT_DIGITS:
        raise invalid_argument("Connect-Timeout-Ms must be a positive integer of at most 10 digits")
    return int(value) / 1000


def check_protocol_version(header: str | None) -> None:
    # Optional: the protocol lets servers require it, but curl users rarely send it.
    if header is not None and header.strip() != PROTOCOL_VERSION:
        raise invalid_argument(f"Connect-Protocol-Version must be {PROTOCOL_VERSION!r}")


def request_encoding(content_encoding: str | None) -> str:
    """The body's ``Content-Encoding``, normalised; "identity" when absent."""
    return (content_encoding or "identity").strip().lower()


async def read_body(request: Request, limit: int) -> bytearray:
    """The whole request body, refusing (without reading further) past ``limit`` bytes.

    A declared ``Content-Length`` over the limit is refused before reading anything;
    chunked bodies are counted as they arrive, so memory never exceeds the limit.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large(limit)
    return body  # not copied to bytes: a checkpoint body can be 100 MiB


class CallStoreEndpoint:
    """The ASGI app answering ``POST /sdk.v1.SdkStoreCallbackService/CallStore``."""

    def __init__(self, handler: CallHandler, *, auth_token: str, max_request_bytes: int) -> None:
        self._handler = handler
        self._token = auth_token.encode("utf-8")
        self._limit = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self._respond(request)
        except ClientDisconnect:
            return  # nobody is left to answer
        except Exception:
            # A bug in this layer: still a Connect error, never Starlette's text/plain 500.
            logger.exception("CallStore request handling failed")
            response = error_response(ConnectError(Code.INTERNAL, "internal error"))
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        headers = request.headers
        if not self._authenticated(headers.get("authorization")):
            return error_response(
                ConnectError(Code.UNAUTHENTICATED, "missing or invalid bearer token"),
                {"www-authenticate": "Bearer"},
            )
        codec = codec_for(headers.get("content-type", ""))
        if codec is None:
            return _unsupported_media_type(headers)
        encoding = request_encoding(headers.get("content-encoding"))
        if encoding not in ("identity", "gzip"):
            # The protocol asks for unimplemented, naming what is supported.
            return error_response(
                ConnectError(Code.UNIMPLEMENTED, f"unsupported Content-Encoding {encoding[:40]!r}"),
                {"accept-encoding": SUPPORTED_ENCODINGS},
            )
        try:
            check_protocol_version(headers.get("connect-protocol-version"))
            timeout = timeout_seconds(headers.get("connect-timeout-ms"))
            try:
                async with asyncio.timeout(timeout) as deadline:
                    # No name keeps the raw body alive while the store works.
                    call = codec.decode(await self._read(request, gzipped=encoding == "gzip"))
                    output = await self._call(call)
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise ConnectError(Code.DEADLINE_EXCEEDED, "Connect-Timeout-Ms elapsed") from None
            return await self._encode(codec, output, headers)
        except ConnectError as error:
            return error_response(error)

    def _authenticated(self, header: str | None) -> bool:
        scheme, _, token = (header or "").partition(" ")
        # latin-1 gives back the header's raw bytes; compare_digest takes constant time
        # so the comparison does not reveal how much of a guess was right.
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode("latin-1"), self._token
        )

    async def _read(self, request: Request, *, gzipped: bool) -> bytes | bytearray:
        body = await read_body(request, self._limit)
        # An empty body is an empty message whatever the encoding, as in connect-go.
        return gunzip(body, self._limit) if gzipped and body else body

    async def _call(self, call: CallStoreCall) -> Document | None:
        try:
            return await self._handler(call.substore, call.method, call.input)
        except ConnectError:
            raise
        except Exception:
            # The traceback stays in the server log; the client learns nothing about
            # the backend. Inputs are not logged: they hold secrets and blobs.
            logger.exception("CallStore %.40s.%.40s failed", call.substore, call.method)
            raise ConnectError(Code.INTERNAL, "internal error") from None

    async def _encode(self, codec: Codec, output: Document | None, headers: Headers) -> Response:
        try:
            body = codec.encode(output)
        except Exception:
            logger.exception("CallStore output could not be encoded as %s", codec.name)
            return error_response(ConnectError(Code.INTERNAL, "internal error"))
        response_headers = {}
        if should_compress(len(body), headers.get("accept-encoding", "")):
            body = await compress(body)
            response_headers["content-encoding"] = "gzip"
        return Response(body, media_type=f"application/{codec.name}", headers=response_headers)


def _unsupported_media_type(headers: Headers) -> Response:
    # The protocol answers an unknown codec with HTTP 415 and Accept-Post rather than a
    # Connect error (connect-go sends no body); the text is for people trying curl.
    content_type = headers.get("content-type", "")[:80]
    return Response(
        f"unsupported Content-Type {content_type!r}; use {ACCEPT_POST}\n",
        status_code=415,
        media_type="text/plain",
        headers={"accept-post": ACCEPT_POST},
    )
