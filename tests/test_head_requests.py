"""Every route answers HEAD as GET without a body, on one worker and on several.

Uptime checkers and load balancers probe with HEAD. serve's protocol holds a response
head until the first body write to send both in one write (wire/one_write.py); uvicorn
writes no body for HEAD, so the head was held forever and the connection hung until
the client gave up. Raw HTTP/1.1 over a socket, keep-alive: each answer must be
complete (no body) and the next request on the same connection answered too.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.retention import agent_doc, run_doc
from tests.support.server import CALL_STORE_PATH, ServerProcess, serve

AGENT = "agent-4d2e6f10-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
RUN = "run-5e3f7a21-2b3c-4d5e-9f0a-1b2c3d4e5f60"
#: Every wait on the server; a hang fails the test rather than the suite.
SOCKET_TIMEOUT_SECONDS = 10.0
#: Connections tried until each worker has answered one (the kernel picks the worker).
MAX_CONNECTIONS = 60

#: Paths anyone may ask for, and the viewer's pages and exports (asked with the token).
OPEN_PATHS = ["/healthz", "/readyz", "/", "/ui/sign-in", "/ui/static/viewer.css"]
VIEWER_PATHS = [
    "/ui/",
    "/ui/?format=json",
    f"/ui/agent?id={AGENT}",
    "/ui/runs",
    "/ui/overview",
    f"/ui/run?agent={AGENT}&id={RUN}",
    f"/ui/run?id={RUN}",
    f"/ui/events?agent={AGENT}&id={RUN}",
    f"/ui/outline?agent={AGENT}&id={RUN}",
    "/ui/search?q=hello",
    f"/ui/export/run.jsonl?agent={AGENT}&run={RUN}",
    f"/ui/export/agent.jsonl?id={AGENT}",
    f"/ui/export/transcript.md?agent={AGENT}&run={RUN}",
    "/metrics",
]


@pytest.fixture(params=[1, 2], ids=["one-worker", "two-workers"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    workers = str(request.param)
    with serve("--store", f"sqlite:///{tmp_path}/store.db", "--workers", workers) as server:
        server.call(
            "agents", "create", {"agent": agent_doc(AGENT, updated_at=1, status="idle", cwd="/w")}
        )
        server.call("runs", "create", {"run": run_doc(AGENT, RUN, 1, "finished", 1)})
        event = {"runId": RUN, "eventType": "run_stream_event", "payload": {}, "createdAt": 2}
        server.call("runEvents", "append", event)
        yield server


def read_answer(connection: socket.socket, buffered: bytes) -> tuple[bytes, bytes]:
    """One answer's head (a HEAD answer has no body), and what followed it."""
    while b"\r\n\r\n" not in buffered:
        chunk = connection.recv(65536)
        assert chunk, f"the server closed the connection; it had sent {buffered!r}"
        buffered += chunk
    head, _, rest = buffered.partition(b"\r\n\r\n")
    return head, rest


def request(path: str, method: str, token: str, body: bytes = b"") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def status_of(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


def header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def test_head_is_answered_like_get_on_every_route_and_keeps_the_connection(
    server: ServerProcess,
) -> None:
    parts = urlsplit(server.url)
    address = (parts.hostname or "", parts.port or 0)
    gets: dict[str, tuple[int, bytes | None]] = {}
    workers_seen: set[bytes] = set()
    for _ in range(MAX_CONNECTIONS):
        with socket.create_connection(address, timeout=SOCKET_TIMEOUT_SECONDS) as connection:
            rest = b""
            for path in OPEN_PATHS + VIEWER_PATHS:
                connection.sendall(request(path, "HEAD", server.token))
                head, rest = read_answer(connection, rest)
                assert rest == b"", f"HEAD {path} sent a body: {rest[:80]!r}"
                if path not in gets:
                    gets[path] = _get(server, path)
                status, content_type = gets[path]
                assert (status_of(head), header(head, b"content-type")) == (
                    status,
                    content_type,
                ), f"HEAD {path}: {head!r}"
            # The same connection still answers a call: which worker did, by request id.
            body = b'{"substore":"agents","method":"get","input":{"agentId":"%s"}}' % AGENT.encode()
            connection.sendall(request("/" + CALL_STORE_PATH, "POST", server.token, body))
            head, rest = read_answer(connection, rest)
            assert status_of(head) == 200
            request_id = header(head, b"x-request-id")
            assert request_id is not None
            workers_seen.add(request_id[:16])
        if len(workers_seen) == server.ready.get("workers", 1):
            break
    assert len(workers_seen) == server.ready.get("workers", 1)


def _get(server: ServerProcess, path: str) -> tuple[int, bytes | None]:
    """What GET answers on ``path``: the status and content type HEAD must repeat."""
    answer = httpx.get(
        server.url.rstrip("/") + path,
        headers={"Authorization": f"Bearer {server.token}"},
        follow_redirects=False,
        timeout=SOCKET_TIMEOUT_SECONDS,
    )
    content_type = answer.headers.get("content-type")
    return answer.status_code, content_type.encode() if content_type is not None else None
