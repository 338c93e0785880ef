"""http_guard.py, http_limits.py: bounded heads, slow clients cut off, a connection cap.

Each test runs the real app on uvicorn with the guarded protocol and small limits, and
talks raw HTTP/1.1 over a socket so it controls exactly what arrives when. Waits are
bounded by the socket timeout; nothing asserts on durations.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import READY_PREFIX, ServerConfig
from bridge_store.server.serving import UVICORN_SETTINGS
from bridge_store.stack.stores import Routes
from bridge_store.wire.http_guard import guarded_protocol
from bridge_store.wire.http_limits import RESERVED_FILE_DESCRIPTORS, HttpLimits, connection_cap
from testkit.inprocess import running

TOKEN = "http-guard-test-token"
SERVE_MEMORY = ("--store", "memory://", "--log-level", "warning")
#: Every wait on the server; a test fails rather than hangs past it.
SOCKET_TIMEOUT_SECONDS = 10.0
SMALL = HttpLimits(
    max_head_bytes=4096,
    max_header_count=20,
    head_timeout=0.3,
    body_timeout=0.3,
    keep_alive_timeout=1,
    max_connections=1000,
)


@contextmanager
def guarded_server(limits: HttpLimits = SMALL) -> Iterator[tuple[str, int]]:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    settings: dict[str, Any] = {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": limits.keep_alive_timeout,
    }
    with running(app, **settings) as url:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        yield parts.hostname, parts.port


def connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=SOCKET_TIMEOUT_SECONDS)


def head(body_length: int, extra: bytes = b"") -> bytes:
    return (
        f"POST {CALL_STORE_PATH} HTTP/1.1\r\nHost: test\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n".encode()
        + extra
        + f"Content-Length: {body_length}\r\n\r\n".encode()
    )


def call_body(substore: str, method: str, data: dict[str, Any]) -> bytes:
    return json.dumps({"substore": substore, "method": method, "input": data}).encode()


GET_BODY = call_body("agents", "get", {"agentId": "a-1"})


def request(body: bytes = GET_BODY, extra: bytes = b"") -> bytes:
    return head(len(body), extra) + body


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed without answering (got {data!r})"
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed in the middle of a response body"
        body += chunk
    return int(lines[0].split()[1]), headers, body[:length]


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection (EOF or reset) within the socket timeout."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def connect_error(body: bytes) -> tuple[str, str]:
    error = json.loads(body)
    return error["code"], error["message"]


def test_calls_that_arrive_in_one_read_are_served_on_one_kept_alive_connection() -> None:
    with guarded_server() as address, connect(address) as sock:
        for _ in range(3):
            sock.sendall(request())
            status, _, body = read_response(sock)
            assert (status, json.loads(body)) == (200, {})


def test_a_body_far_larger_than_the_head_limit_is_served() -> None:
    # Its last read ends the message: those bytes are body, not the next head.
    body = call_body(
        "checkpoints", "create", {"agentId": "a", "blobId": "b", "data": "A" * 300_000}
    )
    with guarded_server() as address, connect(address) as sock:
        sock.sendall(head(len(body)))
        for start in range(0, len(body), 50_000):
            sock.sendall(body[start : start + 50_000])
        assert read_response(sock)[:1] == (200,)


def test_a_kept_alive_connection_outlives_the_head_timeout_between_calls() -> None:
    limits = HttpLimits(head_timeout=0.3, keep_alive_timeout=30)
    with guarded_server(limits) as address, connect(address) as sock:
        sock.sendall(request())
        assert read_response(sock)[0] == 200
        time.sleep(1.0)  # idle for longer than the head timeout, well within keep-alive
        sock.sendall(request())
        assert read_response(sock)[0] == 200


def test_blank_lines_after_a_response_do_not_hold_a_connection_open() -> None:
    # The parser skips them without starting a request; they still stop the keep-alive
    # timer, so they start the head timer instead.
    limits = HttpLimits(head_timeout=0.3, keep_alive_timeout=30)
    with guarded_server(limits) as address, connect(address) as sock:
        sock.sendall(request())
        assert read_response(sock)[0] == 200
        sock.sendall(b"\r\n")
        status, _, body = read_response(sock)
        assert (status, connect_error(body)[0]) == (408, "deadline_exceeded")


def test_a_head_within_the_limit_is_served_and_a_larger_one_is_431() -> None:
    with guarded_server() as address:
        with connect(address) as sock:
            sock.sendall(request(extra=b"X-Pad: " + b"a" * 3000 + b"\r\n"))
            assert read_response(sock)[0] == 200
        with connect(address) as sock:
            sock.sendall(request(extra=b"X-Pad: " + b"a" * 5000 + b"\r\n"))
            status, headers, body = read_response(sock)
            assert status == 431
            assert headers["connection"] == "close"
            assert connect_error(body) == (
                "resource_exhausted",
                "request head larger than 4096 bytes",
            )
            assert closed_by_server(sock)


def test_too_many_headers_is_431() -> None:
    extra = b"".join(b"X-%d: v\r\n" % index for index in range(20))
    with guarded_server() as address, connect(address) as sock:
        sock.sendall(request(extra=extra))
        status, _, body = read_response(sock)
        assert (status, connect_error(body)[0]) == (431, "resource_exhausted")


def test_a_head_that_never_ends_is_refused_once_it_passes_the_limit() -> None:
    # The parser buffers a header until its line ends: without the bound, memory grew
    # with whatever a client sent.
    with guarded_server() as address, connect(address) as sock:
        sock.sendall(f"POST {CALL_STORE_PATH} HTTP/1.1\r\nX-Endless: ".encode())
        sock.sendall(b"a" * 8192)
        status, _, body = read_response(sock)
        assert (status, connect_error(body)[0]) == (431, "resource_exhausted")
        assert closed_by_server(sock)


def test_a_connection_that_sends_nothing_is_closed_with_408() -> None:
    with guarded_server() as address, connect(address) as sock:
        status, _, body = read_response(sock)
        assert status == 408
        assert connect_error(body) == (
            "deadline_exceeded",
            "the request head did not arrive within 0.3 s",
        )
        assert closed_by_server(sock)


def test_a_head_sent_a_byte_at_a_time_is_cut_off() -> None:
    # Slowloris: every byte arrives well within the head timeout of the one before,
    # yet the head as a whole must arrive within it.
    with guarded_server() as address, connect(address) as sock:
        answered = b""
        for byte in request():
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.05)
            sock.setblocking(False)
            try:
                answered += sock.recv(65536)
            except BlockingIOError:
                pass
            finally:
                sock.settimeout(SOCKET_TIMEOUT_SECONDS)
            if answered:
                break
        assert answered.startswith(b"HTTP/1.1 408 ")


def test_a_stalled_body_is_cut_off_and_never_reaches_the_store() -> None:
    agent = {"agentId": "stalled", "cwd": "/w", "updatedAt": 1}
    body = call_body("agents", "create", {"agent": agent})
    with guarded_server() as address:
        with connect(address) as sock:
            sock.sendall(head(len(body)) + body[: len(body) // 2])
            status, _, answer = read_response(sock)
            assert status == 408
            assert connect_error(answer)[0] == "deadline_exceeded"
            assert closed_by_server(sock)
        with connect(address) as sock:
            sock.sendall(request(call_body("agents", "get", {"agentId": "stalled"})))
            assert json.loads(read_response(sock)[2]) == {}


def test_a_body_that_keeps_arriving_is_not_cut_off() -> None:
    # The body timeout bounds the pause between two reads, not the whole body: a big
    # checkpoint on a slow link takes as long as it takes.
    limits = HttpLimits(body_timeout=1.0, head_timeout=5.0)
    agent = {"agentId": "paced", "cwd": "/w", "updatedAt": 1, "pad": "x" * 700}
    body = call_body("agents", "create", {"agent": agent})
    pieces = [body[start : start + 100] for start in range(0, len(body), 100)]
    assert len(pieces) >= 8  # 8 pauses of 0.2 s: longer than the timeout in all
    with guarded_server(limits) as address, connect(address) as sock:
        sock.sendall(head(len(body)))
        for piece in pieces:
            time.sleep(0.2)
            sock.sendall(piece)
        status, _, answer = read_response(sock)
        assert status == 200
        assert json.loads(answer)["output"]["agentId"] == "paced"


def test_an_idle_kept_alive_connection_is_closed() -> None:
    with guarded_server() as address, connect(address) as sock:
        sock.sendall(request())
        assert read_response(sock)[0] == 200
        assert closed_by_server(sock)


def test_at_the_cap_a_new_connection_takes_the_place_of_the_oldest_idle_one() -> None:
    limits = HttpLimits(max_connections=3, head_timeout=30.0)
    with guarded_server(limits) as address:
        idle = [connect(address) for _ in range(3)]
        try:
            with connect(address) as sock:
                sock.sendall(request())
                assert read_response(sock)[0] == 200
            # The oldest gets no answer: it had sent nothing, so it can reconnect freely.
            assert idle[0].recv(65536) == b""
        finally:
            for sock in idle:
                sock.close()


def test_at_the_cap_with_every_connection_busy_a_new_one_is_refused_at_once() -> None:
    limits = HttpLimits(max_connections=2, head_timeout=30.0, body_timeout=30.0)
    with guarded_server(limits) as address:
        # Two connections in the middle of a request body: neither can be given up.
        busy = [connect(address) for _ in range(2)]
        try:
            for sock in busy:
                sock.sendall(head(len(GET_BODY)) + GET_BODY[:5])
            with connect(address) as sock:
                sock.sendall(request())
                status, _, body = read_response(sock)
                assert status == 503
                assert connect_error(body) == ("unavailable", "too many open connections")
                assert closed_by_server(sock)
            for sock in busy:
                sock.sendall(GET_BODY[5:])
                assert read_response(sock)[0] == 200
        finally:
            for sock in busy:
                sock.close()


def test_serve_settings_bound_every_connection() -> None:
    protocol = UVICORN_SETTINGS["http"]
    limits: HttpLimits = protocol.limits
    assert limits == HttpLimits()
    assert limits.max_head_bytes == 64 * 1024
    assert UVICORN_SETTINGS["timeout_keep_alive"] == limits.keep_alive_timeout


def test_the_connection_cap_leaves_descriptors_for_the_backends() -> None:
    assert connection_cap(4096, 1_048_576) == 4096
    assert connection_cap(4096, 1024) == 1024 - RESERVED_FILE_DESCRIPTORS
    assert connection_cap(10, 1024) == 10
    assert connection_cap(4096, resource.RLIM_INFINITY) == 4096


def test_serve_raises_its_soft_open_file_limit_to_the_hard_one(tmp_path: Path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 512:
        pytest.skip(f"the hard open-file limit here is only {hard}")

    def lower_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))

    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", *SERVE_MEMORY],
        cwd=tmp_path,
        env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lower_soft_limit,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith(READY_PREFIX), line
        limits = Path(f"/proc/{process.pid}/limits").read_text().splitlines()
        open_files = next(row for row in limits if row.startswith("Max open files")).split()
        assert open_files[3] == open_files[4]  # soft == hard
    finally:
        process.terminate()
        process.wait(SOCKET_TIMEOUT_SECONDS)
        if process.stderr is not None:
            process.stderr.close()
