"""Connect unary answers: a complete HTTP response, sent as two ASGI messages.

Apart from :mod:`bridge_store.rpc.connect` so the bench's ceiling (``bench/servers.py``)
answers exactly as the real endpoint does without importing the endpoint's machinery.
"""

from __future__ import annotations

import json

from starlette.types import Send

from ..errors import Code, ConnectError
from ._codecs import CODECS

#: Sent with 415, as the Connect protocol asks, to name the codecs this server speaks.
ACCEPT_POST = "application/json, application/proto"

#: The codecs' media types, encoded once.
_MEDIA_TYPES = {codec.media_type: codec.media_type.encode("latin-1") for codec in CODECS.values()}


class Reply:
    """A complete unary HTTP response: status, headers and body, sent in one go.

    ``code`` is the Connect code the client reads from it, ``ok`` for a success.
    """

    __slots__ = ("body", "code", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
        *,
        code: str = "ok",
    ) -> None:
        self.status = status
        self.code = code
        self.body = body
        self.headers = [
            (b"content-type", content_type.encode("latin-1")),
            (b"content-length", str(len(body)).encode("latin-1")),
        ]
        for name, value in (headers or {}).items():
            self.headers.append((name.encode("latin-1"), value.encode("latin-1")))

    @classmethod
    def ok(cls, body: bytes, content_type: str) -> Reply:
        """A 200 answer with no headers but its type and length: every successful call."""
        reply = cls.__new__(cls)
        reply.status = 200
        reply.code = "ok"
        reply.body = body
        reply.headers = [
            (b"content-type", _MEDIA_TYPES.get(content_type) or content_type.encode("latin-1")),
            (b"content-length", b"%d" % len(body)),
        ]
        return reply

    async def send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


def error_response(error: ConnectError, headers: dict[str, str] | None = None) -> Reply:
    """A Connect unary error: JSON ``{"code", "message"}`` with the code's HTTP status.

    Errors are JSON whatever codec the request used, as the protocol specifies.
    """
    body = json.dumps({"code": error.code.value, "message": error.message}).encode("utf-8")
    return Reply(error.code.http_status, body, "application/json", headers, code=error.code.value)


def unsupported_media_type(content_type: str) -> Reply:
    # The protocol answers an unknown codec with HTTP 415 and Accept-Post rather than a
    # Connect error (connect-go sends no body); the text is for people trying curl.
    body = f"unsupported Content-Type {content_type[:80]!r}; use {ACCEPT_POST}\n"
    return Reply(
        415,
        body.encode("utf-8"),
        "text/plain; charset=utf-8",
        {"accept-post": ACCEPT_POST},
        # What a Connect client makes of an HTTP 415.
        code=Code.UNKNOWN.value,
    )
