"""Bodies at the request limit, over HTTP, on every real backend.

A checkpoint whose JSON request body is exactly as long as the limit is accepted and
stored byte for byte; one byte more is refused with ``resource_exhausted`` before the
store sees it, whether the body declares its length or arrives chunked (as the
bridge's client may send it), and nothing is stored. SQLite runs at serve's default
limit (128 MiB); the backends behind a network run at 48 MiB, half again the
largest conformance blob, which keeps the suite's time and memory modest.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.wire.http_limits import DEFAULT_MAX_REQUEST_BYTES

from .support.server import CALL_STORE_PATH, ServerProcess, serve
from .support.stores import serve_arguments

pytestmark = pytest.mark.slow

CONFIGURED_LIMIT = 48 * 1024 * 1024
HEAD = b'{"substore":"checkpoints","method":"create","input":{"agentId":"a","blobId":"%s","data":"'
TAIL = b'"}}'


def body_of(blob_id: str, size: int) -> tuple[bytes, bytes]:
    """A create request of exactly ``size`` bytes, and the blob it carries."""
    head = HEAD % blob_id.encode()
    room = size - len(head) - len(TAIL)
    raw = os.urandom(room // 4 * 3)
    data = base64.b64encode(raw)
    # JSON allows whitespace after a value: it pads the body to the exact size.
    body = head + data + TAIL[:1] + b" " * (room - len(data)) + TAIL[1:]
    assert len(body) == size
    return body, raw


def post(server: ServerProcess, content: bytes | Iterator[bytes]) -> httpx.Response:
    return httpx.post(
        server.url + CALL_STORE_PATH,
        content=content,
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
        timeout=300,
    )


def chunks(body: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """The body as a stream: httpx sends it chunked, with no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize(
    ("kind", "limit"),
    [
        pytest.param("sqlite", DEFAULT_MAX_REQUEST_BYTES, id="sqlite-default"),
        pytest.param("postgres", CONFIGURED_LIMIT, marks=pytest.mark.postgres),
        pytest.param("redis", CONFIGURED_LIMIT, marks=pytest.mark.redis),
        pytest.param("s3", CONFIGURED_LIMIT, marks=pytest.mark.s3),
    ],
)
def test_a_body_at_the_limit_is_stored_and_one_byte_more_is_refused(
    kind: str, limit: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    args = serve_arguments(kind, request, tmp_path)
    if limit != DEFAULT_MAX_REQUEST_BYTES:
        args += ["--max-request-bytes", str(limit)]
    with serve(*args) as server:
        at_the_limit_and_past_it(server, limit)


def at_the_limit_and_past_it(server: ServerProcess, limit: int) -> None:
    body, raw = body_of("at the limit", limit)
    accepted = post(server, body)
    assert accepted.status_code == 200, accepted.text[:500]
    assert accepted.json() == {}
    del body
    found = server.call("checkpoints", "get", {"agentId": "a", "blobId": "at the limit"})
    assert base64.b64decode(found["data"]) == raw
    del found, raw

    over, _ = body_of("over", limit + 1)
    for content in (over, chunks(over)):
        refused = post(server, content)
        assert refused.status_code == 429, refused.text[:500]
        assert refused.json()["code"] == "resource_exhausted"
    assert server.call("checkpoints", "get", {"agentId": "a", "blobId": "over"}) == {"found": False}
    assert server.call("checkpoints", "list", {"filter": {}})["items"] == ["at the limit"]
