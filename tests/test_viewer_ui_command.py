"""``bridge-store ui``: the standalone viewer as a command, over a store written before."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import httpx

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.config import READY_PREFIX

from .support.history import LOGIN_AGENT, history_calls
from .support.server import serve

STOP_TIMEOUT_SECONDS = 30


def test_ui_serves_the_viewer_alone_and_reads_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve("--store", store) as server:
        for substore, method, data in history_calls():
            server.call(substore, method, data)
    token_file = tmp_path / "ui.token"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bridge_store",
            "ui",
            "--port",
            "0",
            "--store",
            store,
            "--auth-token-file",
            str(token_file),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        line = next(line for line in process.stderr if line.startswith(READY_PREFIX))
        ready = json.loads(line.removeprefix(READY_PREFIX))
        assert ready["url"].endswith("/ui/")
        assert ready["viewerUrl"] == ready["url"]  # where serve's ready line has it too
        assert ready["version"] == version("bridge-store")
        assert ready["authTokenFile"] == str(token_file)
        token = token_file.read_text().strip()
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        headers = {"Authorization": f"Bearer {token}"}
        agents = httpx.get(ready["url"] + "?format=json", headers=headers).json()["agents"]
        assert agents[0]["agentId"] == LOGIN_AGENT
        assert httpx.get(ready["url"]).status_code == 303  # sign in first
        root = ready["url"].removesuffix("ui/")
        refused = httpx.post(
            root + CALL_STORE_PATH.lstrip("/"),
            json={"substore": "agents", "method": "delete", "input": {"filter": {}}},
            headers=headers,
        )
        assert refused.status_code in (404, 405)
    finally:
        process.terminate()
        process.communicate(timeout=STOP_TIMEOUT_SECONDS)
    assert process.returncode == 0


def test_ui_names_a_bad_store_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bridge_store", "ui", "--port", "0", "--store", "nosuch://x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("bridge-store: no installed backend serves nosuch:// URLs")
    assert len(done.stderr.splitlines()) == 1
