"""CallStore served by the official ``connectrpc`` runtime, for comparison only.

The candidate we evaluated against the hand-written ``bridge_store.connect``: same
dispatch, same memory backend, same uvicorn. The service definition below is what
``protoc-gen-connectrpc --opt protobuf=google`` generates for
``sdk.v1.SdkStoreCallbackService`` (a method table and an ASGI application subclass),
written out so the benchmark needs no code generator. Auth is a leading metadata
interceptor, which connectrpc runs before reading the body; our ConnectErrors are
mapped to connectrpc's, other exceptions to ``internal``.

``create_connectrpc_app(config)`` uses connectrpc's google.protobuf codecs (JSON through
``json_format``); ``create_connectrpc_app(config, our_codecs=True)`` plugs
bridge-store's own codecs into connectrpc instead, which isolates the cost of the
framework itself. ``bench/connect_overhead.py`` serves either.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from connectrpc.code import Code as RpcCode
from connectrpc.compat import google_protobuf_codecs
from connectrpc.errors import ConnectError as RpcError
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint

from bridge_store._codecs import CODECS, CallStoreCall, Codec, from_struct
from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import (
    CallStoreRequest,
    CallStoreResponse,
)
from bridge_store.config import ServerConfig
from bridge_store.dispatch import call_store
from bridge_store.errors import ConnectError
from bridge_store.plugins import get_plugin_manager
from bridge_store.stores import Stores, open_stores
from bridge_store.types import Document

SERVICE = "sdk.v1.SdkStoreCallbackService"
CALL_STORE = MethodInfo(
    name="CallStore",
    service_name=SERVICE,
    input=CallStoreRequest,
    output=CallStoreResponse,
    idempotency_level=IdempotencyLevel.UNKNOWN,
    stream_type=StreamType.UNARY,
)
logger = logging.getLogger(__name__)


class CallStoreService:
    def __init__(self, stores: Stores) -> None:
        self._stores = stores

    async def call_store(
        self, request: CallStoreRequest, ctx: RequestContext[Any, Any]
    ) -> CallStoreResponse:
        try:
            data = from_struct(request.input) if request.HasField("input") else None
            output = await call_store(self._stores, request.substore, request.method, data)
        except ConnectError as error:
            raise RpcError(RpcCode(error.code.value), error.message) from None
        except Exception:
            logger.exception("CallStore failed")
            raise RpcError(RpcCode.INTERNAL, "internal error") from None
        response = CallStoreResponse()
        if output is not None:
            response.output.update(output)
        return response


class OurCodec:
    """One of bridge-store's codecs behind connectrpc's Codec protocol.

    Requests decode straight to a ``CallStoreCall`` and responses encode from the
    output dict, skipping protobuf messages on the JSON path.
    """

    def __init__(self, codec: Codec) -> None:
        self._codec = codec

    def name(self) -> str:
        return self._codec.name

    def encode(self, message: Document | None) -> bytes:
        return self._codec.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> CallStoreCall:
        return self._codec.decode(bytes(data))


class DirectService:
    """The service for ``OurCodec``: takes and returns plain JSON values."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores

    async def call_store(
        self, call: CallStoreCall, ctx: RequestContext[Any, Any]
    ) -> Document | None:
        try:
            return await call_store(self._stores, call.substore, call.method, call.input)
        except ConnectError as error:
            raise RpcError(RpcCode(error.code.value), error.message) from None
        except Exception:
            logger.exception("CallStore failed")
            raise RpcError(RpcCode.INTERNAL, "internal error") from None


class BearerAuth:
    """Rejects a request before its body is read unless it carries the token."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")

    async def on_start(self, ctx: RequestContext[Any, Any]) -> None:
        scheme, _, token = (ctx.request_headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode("latin-1"), self._token
        ):
            raise RpcError(RpcCode.UNAUTHENTICATED, "missing or invalid bearer token")

    async def on_end(self, token: None, ctx: RequestContext[Any, Any], error: Any, /) -> None:
        return None


class SdkStoreCallbackServiceASGIApplication(ConnectASGIApplication[Any]):
    def __init__(
        self, service: AsyncIterator[Any], token: str, limit: int, codecs: list[Any]
    ) -> None:
        super().__init__(
            service=service,
            endpoints=_endpoints,
            interceptors=[BearerAuth(token)],
            read_max_bytes=limit,
            codecs=codecs,
        )

    @property
    def path(self) -> str:
        return f"/{SERVICE}"


def _endpoints(service: CallStoreService | DirectService) -> Mapping[str, Any]:
    return {f"/{SERVICE}/CallStore": Endpoint.unary(CALL_STORE, service.call_store)}


def create_connectrpc_app(
    config: ServerConfig, *, our_codecs: bool = False
) -> SdkStoreCallbackServiceASGIApplication:
    async def service() -> AsyncIterator[Any]:
        opened = await open_stores(get_plugin_manager(), config.routes, migrate=config.migrate)
        try:
            if our_codecs:
                yield DirectService(opened.stores)
            else:
                yield CallStoreService(opened.stores)
        finally:
            await opened.close()

    codecs = (
        [OurCodec(codec) for codec in CODECS.values()] if our_codecs else google_protobuf_codecs()
    )
    return SdkStoreCallbackServiceASGIApplication(
        service(), config.auth_token, config.max_request_bytes, codecs
    )
