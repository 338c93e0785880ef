"""``serve --workers 2`` under the signals a terminal and a supervisor send.

- Ctrl-C reaches the whole process group: each worker gets the terminal's SIGINT and
  the parent's forwarded one, and uvicorn takes a second SIGINT as "force quit". It
  reset the calls in flight; now the parent forwards SIGINT as SIGTERM, so a Ctrl-C
  is as graceful as a SIGTERM.
- A parent killed with SIGKILL left its workers serving, re-parented to init, and a
  supervisor's restart failed with "address already in use". Now each worker ends
  (gracefully, as on SIGTERM) once its parent is gone, whatever killed it: at start,
  while the first worker migrates, and while serving.

A call in flight is held open with ``Expect: 100-continue``: the server's ``100
Continue`` says the request has reached the application, and its body is sent only
once the stop is under way.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.processes import descendants, still_running
from tests.support.server import CALL_STORE_PATH, ServerProcess, serve, start_server

#: Every wait on the server; a hang fails the test rather than the suite.
SOCKET_TIMEOUT_SECONDS = 30.0
#: Calls held in flight across the stop: the kernel spreads them over the workers.
CALLS = 4
#: How long the migrating worker would wait on the file's lock: far past the test.
LOCK_WAIT_MS = 600_000
BODY = b'{"substore":"agents","method":"get","input":{"agentId":"agent-signals"}}'


def address_of(server: ServerProcess) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "", parts.port or 0


def call_in_flight(server: ServerProcess) -> socket.socket:
    """A CallStore call whose head the server has read, waiting for its body."""
    connection = socket.create_connection(address_of(server), timeout=SOCKET_TIMEOUT_SECONDS)
    connection.sendall(
        (
            f"POST /{CALL_STORE_PATH} HTTP/1.1\r\nHost: test\r\n"
            f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
            f"Expect: 100-continue\r\nContent-Length: {len(BODY)}\r\n\r\n"
        ).encode()
    )
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(4096)
        assert chunk, "the server closed the connection before 100 Continue"
        received += chunk
    assert received.startswith(b"HTTP/1.1 100 Continue\r\n"), received
    return connection


def finish(connection: socket.socket) -> bytes:
    """Send the call's body; the status line of its answer."""
    with closing(connection):
        connection.sendall(BODY)
        received = b""
        while b"\r\n" not in received:
            chunk = connection.recv(4096)
            assert chunk, "the call in flight was cut off"
            received += chunk
        return received.split(b"\r\n", 1)[0]


def wait_for_lines(server: ServerProcess, text: str, count: int) -> None:
    deadline = time.monotonic() + SOCKET_TIMEOUT_SECONDS
    while sum(text in line for line in server.stderr_lines) < count:
        assert time.monotonic() < deadline, f"not {count} x {text!r}: {server.stderr_lines}"
        time.sleep(0.02)


def sqlite_server(tmp_path: Path) -> ServerProcess:
    return start_server("--store", f"sqlite:///{tmp_path}/store.db", "--workers", "2", "--no-ui")


def test_ctrl_c_lets_the_calls_in_flight_finish(tmp_path: Path) -> None:
    server = sqlite_server(tmp_path)
    try:
        workers = sorted(descendants(server.process.pid))
        calls = [call_in_flight(server) for _ in range(CALLS)]
        # What a terminal does on Ctrl-C: SIGINT to every process of the group (serve
        # runs in a session of its own, its pid the group's id).
        os.killpg(server.process.pid, signal.SIGINT)
        wait_for_lines(server, "Shutting down", 2)
        time.sleep(0.3)  # a second SIGINT, had one come, has been taken by now
        assert [finish(call) for call in calls] == [b"HTTP/1.1 200 OK"] * CALLS
        assert server.process.wait(timeout=60) == 0
        assert still_running(workers) == []
    finally:
        server.stop()


def test_workers_end_gracefully_when_the_parent_is_killed_while_serving(tmp_path: Path) -> None:
    server = sqlite_server(tmp_path)
    try:
        port = address_of(server)[1]
        workers = sorted(descendants(server.process.pid))
        assert len(workers) == 2
        calls = [call_in_flight(server) for _ in range(CALLS)]
        server.process.kill()
        server.process.wait(timeout=30)
        wait_for_lines(server, "Shutting down", 2)
        # What a supervisor does next: start the server again on its port. The old
        # workers have stopped listening, and still finish the calls they hold.
        store = f"sqlite:///{tmp_path}/store.db"
        with serve("--store", store, "--port", str(port), "--no-ui") as again:
            assert address_of(again)[1] == port
            assert [finish(call) for call in calls] == [b"HTTP/1.1 200 OK"] * CALLS
            assert still_running(workers) == []
            assert again.call("agents", "list", {"filter": {}})["items"] == []
    finally:
        server.stop()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """The SQLite file held under an exclusive lock: a server's migration waits on it."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


def holding(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    try:
        return any(
            os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd")
        )
    except (FileNotFoundError, ProcessLookupError):
        return False


@contextmanager
def migrating(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """``serve --workers 2`` whose first worker waits on the store's lock to migrate,
    in a session of its own; and that worker. Whatever is left is killed at the end."""
    store = tmp_path / "store.db"
    workers: list[int] = []
    with locked(store):
        process = subprocess.Popen(
            [sys.executable, "-m", "bridge_store", "serve", "--port", "0", "--workers", "2",
             "--store", f"sqlite:///{store}?busy_timeout={LOCK_WAIT_MS}"],
            env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": "a-token-of-sixteen-or-more"},
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + SOCKET_TIMEOUT_SECONDS
            while not workers:
                assert process.poll() is None, "serve ended before its first worker migrated"
                assert time.monotonic() < deadline, "no worker opened the store"
                workers = [pid for pid in descendants(process.pid) if holding(pid, store)]
                time.sleep(0.02)
            yield process, workers
        finally:
            process.kill()
            process.communicate(timeout=30)
            for pid in still_running(workers, timeout=0):
                os.kill(pid, signal.SIGKILL)


def test_the_first_worker_ends_when_the_parent_is_killed_while_it_migrates(
    tmp_path: Path,
) -> None:
    with migrating(tmp_path) as (process, workers):
        process.kill()
        process.wait(timeout=30)
        # The worker ends while its migration still waits on the lock.
        assert still_running(workers) == []


def test_ctrl_c_while_the_first_worker_migrates_ends_the_start_as_with_one_process(
    tmp_path: Path,
) -> None:
    with migrating(tmp_path) as (process, workers):
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130  # interrupted, as a shell reports it
        assert "Traceback" not in stderr
        assert still_running(workers) == []
