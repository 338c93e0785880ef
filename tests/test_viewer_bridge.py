"""The viewer and the CLI on a run the real bridge made (offline: the stand-in Cursor
API refuses the model call, saying why, so the run holds a request and two status
changes)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.client import launch_bridge, local_options
from testkit.cursor_api import MODEL_ID, REFUSAL_MESSAGE, CursorApiStub
from tests.support.server import serve

pytestmark = [pytest.mark.bridge, pytest.mark.slow]

CONDITION_TIMEOUT_SECONDS = 30.0


def test_a_real_bridge_run_in_the_viewer_and_the_cli(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    with (
        CursorApiStub() as cursor_api,
        serve("--store", f"sqlite:///{tmp_path / 'store.db'}") as server,
        launch_bridge(
            server.url,
            server.token,
            workspace=project,
            state_root=tmp_path / "state",
            env={"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)},
        ) as bridge,
        bridge.client() as client,
    ):
        options: dict[str, Any] = {
            "model": MODEL_ID,
            "api_key": "viewer-key",
            "local": local_options(project),
        }
        agent = client.agents.create(options, name="viewer e2e")
        result = agent.send("hello").wait()
        assert result.status == "error"
        deadline = time.monotonic() + CONDITION_TIMEOUT_SECONDS
        while server.call("agents", "get", {"agentId": agent.agent_id})["status"] != "error":
            assert time.monotonic() < deadline, "the agent's error status was never stored"
            time.sleep(0.05)

        headers = {"Authorization": f"Bearer {server.token}"}
        ui = server.url + "ui"
        listed = httpx.get(f"{ui}/?format=json", headers=headers).json()
        assert [a["name"] for a in listed["agents"]] == ["viewer e2e"]
        page = httpx.get(f"{ui}/agent?id={agent.agent_id}&format=json", headers=headers).json()
        (run,) = page["runs"]
        assert (run["runId"], run["status"], run["modelId"]) == (result.id, "error", MODEL_ID)
        transcript = httpx.get(
            f"{ui}/run?agent={agent.agent_id}&id={result.id}&format=json", headers=headers
        ).json()
        blocks = transcript["blocks"]
        assert [b["kind"] for b in blocks] == ["request", "status", "status"]
        assert [b["status"] for b in blocks[1:]] == ["RUNNING", "ERROR"]
        assert blocks[2]["message"] == f"[unauthenticated] {REFUSAL_MESSAGE}"
        assert transcript["live"] is False
        html = httpx.get(f"{ui}/run?agent={agent.agent_id}&id={result.id}", headers=headers).text
        assert "ERROR" in html
        assert "no model runs offline" in html

        token_file = tmp_path / "token"
        token_file.write_text(server.token)
        printed = subprocess.run(
            [
                sys.executable,
                "-m",
                "bridge_store",
                "transcript",
                result.id,
                "--store-callback-url",
                server.url,
                "--store-auth-token-file",
                str(token_file),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        lines = printed.stdout.splitlines()
        assert lines[0].startswith("request ")
        assert lines[1] == "status RUNNING"
        assert lines[2].startswith("status ERROR: ")
        assert lines[2] == f"status ERROR: [unauthenticated] {REFUSAL_MESSAGE}"
