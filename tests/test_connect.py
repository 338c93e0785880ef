"""The Connect wire protocol, exercised over HTTP against a real uvicorn server.

One server per module (memory backend, except ``faulty://`` agents that block or
raise on request); every test checks afterwards that the server still serves.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import math
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from google.protobuf import struct_pb2

from bridge_store import hookimpl
from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import (
    CallStoreRequest,
    CallStoreResponse,
)
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.types import Document
from bridge_store.wire import _codecs, _compression
from bridge_store.wire._codecs import MAX_DEPTH
from bridge_store.wire._compression import DEFAULT_COMPRESS_MIN_BYTES, should_compress
from bridge_store_memory import MemoryBackend
from bridge_store_memory.backend import MemoryAgents
from testkit.inprocess import running

TOKEN = "test-token-\u00e9-not-logged"  # non-ASCII on purpose: headers are bytes
LIMIT = 16 * 1024
#: This server gzips from 1 KiB (the default is 64 KiB), so compressed answers fit
#: under its request limit.
COMPRESS_MIN_BYTES = 1024
SLOW_AGENT = "slow-agent"
FAILING_AGENT = "failing-agent"
SECRET = "blob-secret-do-not-log"
JSON = "application/json"
PROTO = "application/proto"


class FaultyAgents(MemoryAgents):
    """Memory agents, except two ids: one never answers, one hits a 'driver bug'."""

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        if agent_id == SLOW_AGENT:
            await asyncio.Event().wait()  # until the request's deadline cancels it
        if agent_id == FAILING_AGENT:
            # A message that carries the data it failed on, as drivers' messages do.
            raise RuntimeError(f"driver exploded on {agent_id!r}")
        return await super().get(tenant, agent_id)


class FaultyBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.agents = FaultyAgents()


class FaultyPlugin:
    @hookimpl
    def bridge_store_url_schemes(self) -> Sequence[str]:
        return ["faulty"]

    @hookimpl
    def bridge_store_open_backend(self, url: str) -> FaultyBackend | None:
        return FaultyBackend() if urlsplit(url).scheme == "faulty" else None


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    config = ServerConfig(
        routes=Routes(
            agents="faulty://", runs="memory://", run_events="memory://", checkpoints="memory://"
        ),
        auth_token=TOKEN,
        max_request_bytes=LIMIT,
        compress_min_bytes=COMPRESS_MIN_BYTES,
    )
    app = create_app(config, plugin_manager=get_plugin_manager(plugins=[FaultyPlugin()]))
    with running(app) as url:
        yield url


def headers(content_type: str = JSON, **extra: str) -> dict[bytes, bytes]:
    """Request headers, as bytes: the token is not ASCII, which httpx only sends as bytes."""
    fields = {
        "content-type": content_type,
        "connect-protocol-version": "1",
        **{name.replace("_", "-"): value for name, value in extra.items()},
    }
    return {
        b"authorization": ("Bearer " + TOKEN).encode(),
        **{name.encode(): value.encode() for name, value in fields.items()},
    }


def json_body(substore: str, method: str, data: Any) -> bytes:
    return json.dumps({"substore": substore, "method": method, "input": data}).encode()


def proto_body(substore: str, method: str, data: Document | None) -> bytes:
    request = CallStoreRequest(substore=substore, method=method)
    if data is not None:
        request.input.update(data)
    return request.SerializeToString()


def agent(agent_id: str, **extra: Any) -> Document:
    return {
        "agentId": agent_id,
        "cwd": "/work",
        "status": "idle",
        "activeRunId": None,
        "name": None,
        "createdAt": 1795994234137,
        "updatedAt": 1795994234140,
        "sdkMetadata": {"blobEncryptionKey": SECRET},
        **extra,
    }


@pytest.fixture
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        yield http
    # Whatever the test did, the server must still answer a fresh client.
    with httpx.Client(base_url=base_url, timeout=10.0) as fresh:
        response = fresh.post(
            CALL_STORE_PATH, content=json_body("agents", "get", {"agentId": "x"}), headers=headers()
        )
        assert (response.status_code, response.json()) == (200, {})


def expect_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == JSON
    body = response.json()
    assert body["code"] == code
    message: str = body["message"]
    return message


def raw_exchange(base_url: str, head: bytes, body: bytes = b"") -> bytes:
    """Send raw bytes, then read the response head while the request stays unfinished.

    The client never completes its body, so an answer proves the server decided
    without reading (or waiting for) the rest.
    """
    parts = urlsplit(base_url)
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10.0) as sock:
        sock.sendall(head + body)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def raw_head(length_header: bytes) -> bytes:
    request_line = f"POST {CALL_STORE_PATH} HTTP/1.1\r\nHost: test\r\n".encode()
    fields = b"".join(name + b": " + value + b"\r\n" for name, value in headers().items())
    return request_line + fields + length_header + b"\r\n"


# -- codecs ---------------------------------------------------------------------------


def test_json_round_trip_and_null_result(client: httpx.Client) -> None:
    doc = agent("json-1")
    created = client.post(
        CALL_STORE_PATH, content=json_body("agents", "create", {"agent": doc}), headers=headers()
    )
    assert created.status_code == 200
    assert created.headers["content-type"] == JSON
    assert created.json() == {"output": doc}
    missing = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "nobody"}),
        headers=headers(),
    )
    assert missing.json() == {}


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8"]
)
def test_json_content_type_variants(client: httpx.Client, content_type: str) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=headers(content_type),
    )
    assert (response.status_code, response.json()) == (200, {})


def test_proto_round_trip_keeps_integers(client: httpx.Client) -> None:
    doc = agent("proto-1", extra={"nested": [1, 2.5, True, None, "s"]})
    response = client.post(
        CALL_STORE_PATH,
        content=proto_body("agents", "create", {"agent": doc}),
        headers=headers(PROTO),
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == PROTO
    output = CallStoreResponse.FromString(response.content).output
    assert output.fields["createdAt"].number_value == 1795994234137
    # Stored from doubles, read back through JSON: the integers are still integers.
    read = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "proto-1"}),
        headers=headers(),
    )
    # Struct maps have no order, so the key may be last.
    assert re.search(rb'"createdAt":1795994234137[,}]', read.content)
    assert read.json()["output"] == doc
    assert type(read.json()["output"]["extra"]["nested"][0]) is int


def test_proto_negative_zero_keeps_its_sign(client: httpx.Client) -> None:
    event = {"runId": "proto-zero", "eventType": "e", "payload": {"z": -0.0, "n": -2.0}}
    response = client.post(
        CALL_STORE_PATH, content=proto_body("runEvents", "append", event), headers=headers(PROTO)
    )
    output = CallStoreResponse.FromString(response.content).output
    zero = output.fields["payload"].struct_value.fields["z"].number_value
    assert math.copysign(1.0, zero) == -1.0
    listed = client.post(
        CALL_STORE_PATH,
        content=json_body("runEvents", "list", {"runId": "proto-zero"}),
        headers=headers(),
    )
    assert listed.json()["output"]["items"][0]["payload"] == {"z": -0.0, "n": -2}
    assert b'"z":-0.0' in listed.content


def test_proto_null_result_leaves_output_unset(client: httpx.Client) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=proto_body("agents", "get", {"agentId": "nobody"}),
        headers=headers(PROTO),
    )
    assert response.status_code == 200
    assert not CallStoreResponse.FromString(response.content).HasField("output")


def test_proto_run_event_seq_is_an_integer(client: httpx.Client) -> None:
    event = {"runId": "proto-run", "eventType": "e", "payload": {"n": 3}}
    response = client.post(
        CALL_STORE_PATH, content=proto_body("runEvents", "append", event), headers=headers(PROTO)
    )
    assert response.status_code == 200
    listed = client.post(
        CALL_STORE_PATH,
        content=json_body("runEvents", "list", {"runId": "proto-run"}),
        headers=headers(),
    )
    item = listed.json()["output"]["items"][0]
    assert (item["seq"], item["offset"], item["payload"]) == (1, "1", {"n": 3})
    assert re.search(rb'"seq":1[,}]', listed.content)


def test_proto_non_finite_number_is_invalid(client: httpx.Client) -> None:
    request = CallStoreRequest(substore="runEvents", method="append")
    request.input.update({"runId": "r", "eventType": "e"})
    request.input.fields["payload"].number_value = float("inf")
    response = client.post(
        CALL_STORE_PATH, content=request.SerializeToString(), headers=headers(PROTO)
    )
    expect_error(response, 400, "invalid_argument")


def test_proto_value_without_kind_is_invalid(client: httpx.Client) -> None:
    request = CallStoreRequest(substore="agents", method="get")
    request.input.fields["agentId"].CopyFrom(struct_pb2.Value())
    response = client.post(
        CALL_STORE_PATH, content=request.SerializeToString(), headers=headers(PROTO)
    )
    expect_error(response, 400, "invalid_argument")


@pytest.mark.parametrize(
    "body",
    [b"\xff\xff\xff", b"\x0a\x05ab", b"\x1a\x03\x0a\x01\xff"],
    ids=["garbage", "truncated", "bad-utf8-key"],
)
def test_malformed_proto_is_invalid(client: httpx.Client, body: bytes) -> None:
    response = client.post(CALL_STORE_PATH, content=body, headers=headers(PROTO))
    expect_error(response, 400, "invalid_argument")


def deep(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[]",
        b'"text"',
        b'{"substore": "agents", "method": "get", "input": []}',
        b'{"substore": 5, "method": "get", "input": {}}',
        b'{"substore": "agents", "method": "get", "input": {"agentId": NaN}}',
        b'{"substore": "agents", "method": "get", "input": {"agentId": 1e999}}',
        b'{"substore": "agents", "method": "get", "input": {"n": ' + b"9" * 5000 + b"}}",
        b'{"substore": "agents", "method": "get", "input": {"agentId": "\xff"}}',
        b"[" * 10_000,
        json_body(
            "runEvents", "append", {"runId": "r", "eventType": "e", "payload": deep(MAX_DEPTH)}
        ),
    ],
    ids=[
        "malformed",
        "empty",
        "array",
        "string",
        "input-array",
        "substore-number",
        "nan",
        "overflow",
        "huge-int",
        "bad-utf8",
        "absurd-nesting",
        "too-deep",
    ],
)
def test_bad_json_is_invalid_argument(client: httpx.Client, body: bytes) -> None:
    response = client.post(CALL_STORE_PATH, content=body, headers=headers())
    expect_error(response, 400, "invalid_argument")


def test_nesting_up_to_the_limit_is_accepted(client: httpx.Client) -> None:
    payload = deep(MAX_DEPTH - 1)  # plus the input object itself: MAX_DEPTH levels
    event = {"runId": "deep-run", "eventType": "e", "payload": payload}
    response = client.post(
        CALL_STORE_PATH, content=json_body("runEvents", "append", event), headers=headers()
    )
    assert response.status_code == 200
    assert response.json()["output"]["payload"] == payload


# -- compression ----------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [JSON, PROTO])
def test_gzip_request_and_response(client: httpx.Client, content_type: str) -> None:
    doc = agent("gzip-" + content_type[-4:], name="n" * (2 * COMPRESS_MIN_BYTES))
    encode = json_body if content_type == JSON else proto_body
    response = client.post(
        CALL_STORE_PATH,
        content=gzip.compress(encode("agents", "create", {"agent": doc})),
        headers=headers(content_type, content_encoding="gzip", accept_encoding="gzip"),
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-encoding"] == "gzip"
    assert len(response.content) > int(response.headers["content-length"])  # httpx inflated it
    if content_type == JSON:
        assert response.json() == {"output": doc}
    else:
        assert CallStoreResponse.FromString(response.content).output["name"] == doc["name"]


@pytest.mark.parametrize("accept_encoding", ["identity", "gzip;q=0", "br"])
def test_response_not_compressed_unless_accepted(
    client: httpx.Client, accept_encoding: str
) -> None:
    doc = agent("plain-" + accept_encoding, name="n" * (2 * COMPRESS_MIN_BYTES))
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "create", {"agent": doc}),
        headers=headers(accept_encoding=accept_encoding),
    )
    assert response.status_code == 200
    assert "content-encoding" not in response.headers


def test_small_response_not_compressed(client: httpx.Client) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=headers(accept_encoding="gzip"),
    )
    assert response.status_code == 200
    assert "content-encoding" not in response.headers


@pytest.mark.parametrize(
    ("size", "min_bytes", "expected"),
    [
        (DEFAULT_COMPRESS_MIN_BYTES - 1, DEFAULT_COMPRESS_MIN_BYTES, False),
        (DEFAULT_COMPRESS_MIN_BYTES, DEFAULT_COMPRESS_MIN_BYTES, True),
        (10 * 1024 * 1024, DEFAULT_COMPRESS_MIN_BYTES, False),  # a blob: sent plain
        (DEFAULT_COMPRESS_MIN_BYTES, 0, False),  # 0: compression off
        (1, 0, False),
    ],
)
def test_compression_threshold(size: int, min_bytes: int, expected: bool) -> None:
    assert should_compress(size, "gzip, br", min_bytes) is expected


def test_checkpoint_blobs_are_not_compressed(client: httpx.Client) -> None:
    # Base64 of encrypted bytes: gzip would cost more CPU than it saves bytes.
    data = base64.b64encode(bytes(range(256)) * 16).decode("ascii")  # 4 KiB, over the minimum
    blob = {"agentId": "a", "blobId": "b"}
    created = client.post(
        CALL_STORE_PATH,
        content=json_body("checkpoints", "create", {**blob, "data": data}),
        headers=headers(),
    )
    assert created.status_code == 200
    got = client.post(
        CALL_STORE_PATH,
        content=json_body("checkpoints", "get", blob),
        headers=headers(accept_encoding="gzip"),
    )
    assert got.status_code == 200
    assert len(got.content) > COMPRESS_MIN_BYTES
    assert "content-encoding" not in got.headers
    assert got.json()["output"]["data"] == data
    # The same size of answer from another method is compressed.
    doc = agent("compressed", name="n" * (2 * COMPRESS_MIN_BYTES))
    client.post(
        CALL_STORE_PATH, content=json_body("agents", "create", {"agent": doc}), headers=headers()
    )
    listed = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "compressed"}),
        headers=headers(accept_encoding="gzip"),
    )
    assert listed.headers["content-encoding"] == "gzip"


def test_unhashable_substore_is_invalid_argument(client: httpx.Client) -> None:
    body = json.dumps({"substore": {"a": 1}, "method": ["get"], "input": {}}).encode()
    expect_error(
        client.post(CALL_STORE_PATH, content=body, headers=headers()), 400, "invalid_argument"
    )


def test_large_responses_compress_off_the_loop_and_huge_ones_go_plain(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scaled-down limits: the real ones need bodies beyond this server's request limit.
    monkeypatch.setattr(_compression, "COMPRESS_INLINE_MAX_BYTES", 3 * 1024)
    monkeypatch.setattr(_compression, "COMPRESS_MAX_BYTES", 6 * 1024)
    threads: list[str] = []
    real_gzip = _compression._gzip

    def spy(data: bytes) -> bytes:
        threads.append(threading.current_thread().name)
        return real_gzip(data)

    monkeypatch.setattr(_compression, "_gzip", spy)
    encodings = []
    for size in (2 * 1024, 4 * 1024, 8 * 1024):
        doc = agent(f"sized-{size}", name="n" * size)
        response = client.post(
            CALL_STORE_PATH,
            content=json_body("agents", "create", {"agent": doc}),
            headers=headers(accept_encoding="gzip"),
        )
        assert response.json() == {"output": doc}
        encodings.append(response.headers.get("content-encoding", "identity"))
    assert encodings == ["gzip", "gzip", "identity"]
    assert threads[0] == "uvicorn"  # small: inline, on the event loop's thread
    assert threads[1] != "uvicorn"  # larger: in a worker thread
    assert len(threads) == 2


@pytest.mark.parametrize("body", [b"not gzip at all", gzip.compress(b"{}")[:-4]])
def test_bad_gzip_is_invalid_argument(client: httpx.Client, body: bytes) -> None:
    response = client.post(CALL_STORE_PATH, content=body, headers=headers(content_encoding="gzip"))
    expect_error(response, 400, "invalid_argument")


def test_unsupported_content_encoding_is_unimplemented(client: httpx.Client) -> None:
    response = client.post(CALL_STORE_PATH, content=b"{}", headers=headers(content_encoding="br"))
    expect_error(response, 501, "unimplemented")
    assert response.headers["accept-encoding"] == "gzip"


# -- bodies and limits ----------------------------------------------------------------


def test_chunked_body_without_content_length(client: httpx.Client) -> None:
    body = json_body("agents", "create", {"agent": agent("chunked-1")})

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 7):
            yield body[start : start + 7]

    response = client.post(CALL_STORE_PATH, content=chunks(), headers=headers())
    assert response.status_code == 200
    assert response.json()["output"]["agentId"] == "chunked-1"


def test_body_over_limit_is_resource_exhausted(client: httpx.Client) -> None:
    doc = agent("too-big", name="x" * LIMIT)
    response = client.post(
        CALL_STORE_PATH, content=json_body("agents", "create", {"agent": doc}), headers=headers()
    )
    expect_error(response, 429, "resource_exhausted")


def test_declared_length_over_limit_is_refused_before_reading(base_url: str) -> None:
    answer = raw_exchange(base_url, raw_head(b"Content-Length: 1000000000000\r\n"))
    assert answer.startswith(b"HTTP/1.1 429 "), answer


def test_chunked_body_over_limit_is_refused_while_streaming(base_url: str) -> None:
    chunk = b"%x\r\n%s\r\n" % (4096, b"x" * 4096)
    # More than the limit, and never the terminating chunk: only a server that counts
    # as it reads can answer.
    answer = raw_exchange(
        base_url, raw_head(b"Transfer-Encoding: chunked\r\n"), chunk * (LIMIT // 4096 + 2)
    )
    assert answer.startswith(b"HTTP/1.1 429 "), answer


def test_gzip_bomb_is_resource_exhausted(client: httpx.Client) -> None:
    bomb = gzip.compress(b" " * (LIMIT * 64))
    assert len(bomb) < LIMIT
    response = client.post(CALL_STORE_PATH, content=bomb, headers=headers(content_encoding="gzip"))
    expect_error(response, 429, "resource_exhausted")


# -- headers, routes, auth ------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"connect_protocol_version": "2"},
        {"connect_timeout_ms": "soon"},
        {"connect_timeout_ms": "-5"},
        {"connect_timeout_ms": "12345678901"},
    ],
    ids=["protocol-version", "timeout-text", "timeout-negative", "timeout-11-digits"],
)
def test_bad_connect_headers_are_invalid_argument(
    client: httpx.Client, extra: dict[str, str]
) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=headers(**extra),
    )
    expect_error(response, 400, "invalid_argument")


def test_protocol_version_header_is_optional(client: httpx.Client) -> None:
    request_headers = headers()
    del request_headers[b"connect-protocol-version"]
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=request_headers,
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", "Basic " + TOKEN, "Bearer", "Bearer " + TOKEN[:-1]]
)
def test_missing_or_wrong_token_is_unauthenticated(
    client: httpx.Client, authorization: str | None
) -> None:
    request_headers = headers()
    del request_headers[b"authorization"]
    if authorization is not None:
        request_headers[b"authorization"] = authorization.encode()
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=request_headers,
    )
    expect_error(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"] == "Bearer"


def test_bearer_scheme_is_case_insensitive(client: httpx.Client) -> None:
    request_headers = headers()
    request_headers[b"authorization"] = ("bearer " + TOKEN).encode()
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=request_headers,
    )
    assert response.status_code == 200


def raw_call(base_url: str, fields: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The response head to an agents.get sent with exactly ``fields`` as its headers."""
    body = json_body("agents", "get", {"agentId": "nobody"})
    head = f"POST {CALL_STORE_PATH} HTTP/1.1\r\nHost: test\r\n".encode()
    head += b"".join(name + b": " + value + b"\r\n" for name, value in fields)
    head += b"Content-Length: %d\r\n\r\n" % len(body)
    return raw_exchange(base_url, head, body)


BEARER = ("Bearer " + TOKEN).encode()
JSON_TYPE = (b"Content-Type", b"application/json")


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        # A repeated header counts by its first value, as Starlette reads one.
        ([(b"Authorization", BEARER), (b"Authorization", b"Bearer wrong"), JSON_TYPE], 200),
        ([(b"Authorization", b"Bearer wrong"), (b"Authorization", BEARER), JSON_TYPE], 401),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Content-Type", b"text/plain")], 200),
        ([(b"Authorization", BEARER), (b"Content-Type", b"text/plain"), JSON_TYPE], 415),
        # Bytes no codec names, latin-1 included, are a 415, never a decoding error.
        ([(b"Authorization", BEARER), (b"Content-Type", b"application/\xe9\xff")], 415),
        ([(b"Authorization", b"Bearer " + TOKEN.encode() + b"\xa0"), JSON_TYPE], 401),
        ([(b"Authorization", b"\xff\xfe " + TOKEN.encode()), JSON_TYPE], 401),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Connect-Protocol-Version", b" 1 ")], 200),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Connect-Protocol-Version", b"\xb9")], 400),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Connect-Timeout-Ms", b"\xb9\xb2")], 400),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Content-Encoding", b"\xe9")], 501),
        ([(b"Authorization", BEARER), JSON_TYPE, (b"Accept-Encoding", b"\xff" * 64)], 200),
    ],
)
def test_headers_read_as_sent(
    base_url: str, fields: list[tuple[bytes, bytes]], status: int
) -> None:
    answer = raw_call(base_url, fields)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer


def test_a_request_id_that_is_not_text_is_replaced(base_url: str) -> None:
    answer = raw_call(
        base_url, [(b"Authorization", BEARER), JSON_TYPE, (b"X-Request-Id", b"caf\xe9 id")]
    )
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    [given] = re.findall(rb"x-request-id: (\S+)\r\n", answer)
    assert re.fullmatch(rb"[0-9a-f]{32}", given), given


def test_unknown_route_is_404(client: httpx.Client) -> None:
    response = client.post(
        "/sdk.v1.SdkStoreCallbackService/Other", content=b"{}", headers=headers()
    )
    assert response.status_code == 404


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_wrong_method_is_405_with_allow(client: httpx.Client, method: str) -> None:
    response = client.request(method, CALL_STORE_PATH, headers=headers())
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "application/json; charset=latin-1", ""]
)
def test_unsupported_content_type_is_415(client: httpx.Client, content_type: str) -> None:
    response = client.post(CALL_STORE_PATH, content=b"{}", headers=headers(content_type))
    assert response.status_code == 415
    assert response.headers["accept-post"] == "application/json, application/proto"


# -- dispatch outcomes ----------------------------------------------------------------


def test_unknown_substore_is_unimplemented(client: httpx.Client) -> None:
    response = client.post(
        CALL_STORE_PATH, content=json_body("sessions", "get", {}), headers=headers()
    )
    assert "sessions" in expect_error(response, 501, "unimplemented")


def test_store_errors_pass_through_with_their_code(client: httpx.Client) -> None:
    body = json_body("agents", "update", {"agent": agent("never-created")})
    expect_error(client.post(CALL_STORE_PATH, content=body, headers=headers()), 404, "not_found")


def test_deadline_exceeded(client: httpx.Client) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": SLOW_AGENT}),
        headers=headers(connect_timeout_ms="50"),
    )
    expect_error(response, 504, "deadline_exceeded")


def test_generous_deadline_does_not_interfere(client: httpx.Client) -> None:
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "x"}),
        headers=headers(connect_timeout_ms="60000"),
    )
    assert response.status_code == 200


def test_backend_exception_is_internal_and_logged_without_secrets(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client.post(  # give the log something secret to leak, if it would
        CALL_STORE_PATH,
        content=json_body("agents", "create", {"agent": agent("secretive")}),
        headers=headers(),
    )
    response = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": FAILING_AGENT}),
        headers=headers(),
    )
    assert expect_error(response, 500, "internal") == "internal error"
    assert "exploded" not in response.text
    failures = [r for r in caplog.records if r.name == "bridge_store.connect"]
    assert len(failures) == 1
    logged = failures[0].getMessage()
    assert logged.startswith("CallStore agents.get failed: builtins.RuntimeError\n")
    # Where it was raised, for the operator; not the message, which can carry data.
    assert "in get" in logged
    assert failures[0].exc_info is None
    assert f"exploded on {FAILING_AGENT!r}" not in caplog.text
    assert TOKEN not in caplog.text
    assert SECRET not in caplog.text


# -- large bodies (checkpoints) --------------------------------------------------------
# Bodies over LARGE_BODY_BYTES take the JSON codec's memory-saving path; the threshold is
# lowered here so bodies under this server's request limit take it.
SMALL_LARGE_BODY_BYTES = 1024


@pytest.fixture
def large_body_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_codecs, "LARGE_BODY_BYTES", SMALL_LARGE_BODY_BYTES)


@pytest.mark.usefixtures("large_body_path")
def test_large_json_checkpoint_round_trips(client: httpx.Client) -> None:
    blob = bytes(range(256)) * (4 * SMALL_LARGE_BODY_BYTES // 256)
    data = base64.b64encode(blob).decode("ascii")
    created = client.post(
        CALL_STORE_PATH,
        content=json_body("checkpoints", "create", {"agentId": "a", "blobId": "big", "data": data}),
        headers=headers(),
    )
    assert (created.status_code, created.json()) == (200, {})
    got = client.post(
        CALL_STORE_PATH,
        content=json_body("checkpoints", "get", {"agentId": "a", "blobId": "big"}),
        headers=headers(),
    )
    assert got.status_code == 200
    assert base64.b64decode(got.json()["output"]["data"]) == blob


@pytest.mark.usefixtures("large_body_path")
@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"substore":"checkpoints","method":"create","input":{"data":"' + b"\xff" * 10, "UTF-8"),
        (b'{"substore":"checkpoints","method":"create","input":{"data":"AAAA', "not valid JSON"),
    ],
)
def test_large_malformed_bodies_are_invalid_argument(
    client: httpx.Client, body: bytes, fragment: str
) -> None:
    padded = body + b"A" * (SMALL_LARGE_BODY_BYTES + 1)
    message = expect_error(
        client.post(CALL_STORE_PATH, content=padded, headers=headers()), 400, "invalid_argument"
    )
    assert fragment in message


@pytest.mark.usefixtures("large_body_path")
def test_large_proto_checkpoint_round_trips(client: httpx.Client) -> None:
    # The codec frees the body once parsed: the parsed message must not alias it.
    blob = bytes(range(256)) * (4 * SMALL_LARGE_BODY_BYTES // 256)
    data = base64.b64encode(blob).decode("ascii")
    body = proto_body("checkpoints", "create", {"agentId": "p", "blobId": "big", "data": data})
    created = client.post(CALL_STORE_PATH, content=body, headers=headers(PROTO))
    assert created.status_code == 200
    got = client.post(
        CALL_STORE_PATH,
        content=proto_body("checkpoints", "get", {"agentId": "p", "blobId": "big"}),
        headers=headers(PROTO),
    )
    got_data = CallStoreResponse.FromString(got.content).output["data"]
    assert isinstance(got_data, str)
    assert base64.b64decode(got_data) == blob


def test_lone_surrogates_round_trip_through_json_and_become_u_fffd_in_proto(
    client: httpx.Client,
) -> None:
    # A JavaScript client may cut a string inside an emoji; JSON keeps the half it sent.
    doc = agent("half-emoji", name="cut \ud83d")
    body = json.dumps({"substore": "agents", "method": "create", "input": {"agent": doc}})
    assert client.post(CALL_STORE_PATH, content=body.encode(), headers=headers()).status_code == 200
    got = client.post(
        CALL_STORE_PATH,
        content=json_body("agents", "get", {"agentId": "half-emoji"}),
        headers=headers(),
    )
    assert b'"cut \\ud83d"' in got.content
    assert got.json()["output"]["name"] == "cut \ud83d"
    as_proto = client.post(
        CALL_STORE_PATH,
        content=proto_body("agents", "get", {"agentId": "half-emoji"}),
        headers=headers(PROTO),
    )
    assert CallStoreResponse.FromString(as_proto.content).output["name"] == "cut \ufffd"
