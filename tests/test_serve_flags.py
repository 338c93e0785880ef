"""``serve``'s log level and compression flags, through the real command line.

``--log-level`` decides what uvicorn and the backends say (tests/test_logs.py covers
the formats and ``--access-log``); ``--gzip-min-bytes N`` gzips answers of N bytes or
more for clients that accept it (0: never), and the default leaves small answers
alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bridge_store.server.config import READY_PREFIX

from .support.server import CALL_STORE_PATH, serve

TOKEN = "flags-test-token-0123456789abcdef"
#: An agent whose JSON answer is a little over 2 KB.
AGENT = {"agentId": "a", "cwd": "/w", "updatedAt": 1, "name": "n" * 2000}


@dataclass
class Output:
    stdout: str
    stderr: str


@contextmanager
def serve_capturing(*args: str) -> Iterator[tuple[str, Output]]:
    """``serve *args`` with both output streams kept; yields its URL, then its output."""
    env = {**os.environ, "BRIDGE_STORE_AUTH_TOKEN": TOKEN}
    command = ["serve", "--port", "0", *args]
    if "--store" not in args:
        command += ["--store", "memory://"]
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    output = Output("", "")
    try:
        assert process.stderr is not None
        seen: list[str] = []
        for line in process.stderr:
            seen.append(line)
            if line.startswith(READY_PREFIX):
                break
        else:
            raise AssertionError("serve never got ready:\n" + "".join(seen))
        ready = json.loads(seen[-1].removeprefix(READY_PREFIX))
        yield ready["url"], output
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        output.stdout, output.stderr = stdout, "".join(seen) + stderr
    assert process.returncode == 0, output.stderr


def call(url: str, method: str, data: object, **headers: str) -> httpx.Response:
    return httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": "agents", "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}", **headers},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("level", "says_started", "warns"),
    [
        ("debug", True, True),
        ("info", True, True),
        ("warning", False, True),
        ("error", False, False),
        ("critical", False, False),
    ],
)
def test_log_level_sets_what_the_server_says(
    level: str, says_started: bool, warns: bool, tmp_path: Path
) -> None:
    # An unmigrated SQLite store served with --no-migrate: the backend warns at start.
    store = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "store.db").touch(mode=0o600)  # --no-migrate creates no database
    with serve_capturing("--log-level", level, "--no-migrate", "--store", store) as (url, out):
        assert call(url, "get", {"agentId": "a"}).status_code == 503
    # uvicorn's own lines, and a backend's, follow the level alike.
    assert ("Application startup complete" in out.stderr) is says_started
    assert (" WARNING bridge_store_sql" in out.stderr) is warns
    assert ("calls will fail until it is upgraded" in out.stderr) is warns
    assert TOKEN not in out.stdout + out.stderr


def content_encoding(url: str) -> str | None:
    response = call(url, "get", {"agentId": "a"}, **{"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.json() == {"output": AGENT}  # httpx undoes the gzip
    encoding: str | None = response.headers.get("content-encoding")
    return encoding


@pytest.mark.parametrize(
    ("flags", "gzipped"),
    [
        pytest.param([], False, id="default: 64 KiB and up"),
        pytest.param(["--gzip-min-bytes", "1024"], True, id="1024"),
        pytest.param(["--gzip-min-bytes", "4096"], False, id="4096"),
        pytest.param(["--gzip-min-bytes", "0"], False, id="0: never"),
    ],
)
def test_gzip_min_bytes(flags: list[str], gzipped: bool) -> None:
    with serve("--store", "memory://", *flags, token=TOKEN) as server:
        server.call("agents", "create", {"agent": AGENT})
        assert content_encoding(server.url) == ("gzip" if gzipped else None)
        # A client that does not accept gzip never gets it.
        plain = call(server.url, "get", {"agentId": "a"}, **{"Accept-Encoding": "identity"})
        assert plain.headers.get("content-encoding") is None
