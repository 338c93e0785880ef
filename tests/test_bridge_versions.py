"""Published bridges, oldest to newest, each driven through its own Python client.

Each tested ``cursor-sdk`` version (tests/support/sdk_versions.py: the oldest with
store callbacks, one from the middle, the newest) is installed in a cached venv of
its own. Its bundled bridge runs against ``bridge-store serve`` and the stand-in
Cursor API; ``sdk_life_cycle.py`` runs the agent life cycle with that version's
client, pausing after each step while the test checks what the store holds.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from bridge_store.client import launch_bridge
from testkit.cursor_api import MODEL_ID, RUN_PATH, CursorApiStub
from tests.support.sdk_versions import TESTED_VERSIONS, SdkInstall, sdk_install
from tests.support.server import ServerProcess, serve

pytestmark = [pytest.mark.bridge, pytest.mark.slow]

LIFE_CYCLE = Path(__file__).with_name("support") / "sdk_life_cycle.py"
STEP_TIMEOUT_SECONDS = 120.0
CONDITION_TIMEOUT_SECONDS = 30.0


class LifeCycle:
    """``sdk_life_cycle.py`` under one version's Python: ``step(name)`` runs the next."""

    def __init__(self, install: SdkInstall, settings: dict[str, str]) -> None:
        self._process = subprocess.Popen(
            [str(install.python), str(LIFE_CYCLE), json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._started = False

    def step(self, expected: str) -> dict[str, Any]:
        """Let the driver go on to its next step and return what it reports."""
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        if self._started:
            self._process.stdin.write("next\n")
            self._process.stdin.flush()
        self._started = True
        line = self._process.stdout.readline()
        if not line:
            _, stderr = self._process.communicate(timeout=STEP_TIMEOUT_SECONDS)
            raise AssertionError(f"the life cycle ended before {expected}:\n{stderr}")
        seen: dict[str, Any] = json.loads(line)
        assert seen["step"] == expected, seen
        return seen

    def finish(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write("next\n")
        self._process.stdin.flush()
        _, stderr = self._process.communicate(timeout=STEP_TIMEOUT_SECONDS)
        assert self._process.returncode == 0, stderr

    def __enter__(self) -> LifeCycle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.communicate(timeout=STEP_TIMEOUT_SECONDS)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONDITION_TIMEOUT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def stored_agent(server: ServerProcess, agent_id: str) -> dict[str, Any] | None:
    agent: dict[str, Any] | None = server.call("agents", "get", {"agentId": agent_id})
    return agent


def stored_runs(server: ServerProcess, agent_id: str) -> list[dict[str, Any]]:
    return server.client.list_all("runs", {"agentIds": [agent_id]})


@pytest.mark.parametrize("version", TESTED_VERSIONS)
def test_life_cycle_of_a_published_bridge(
    version: str, tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    install = sdk_install(version)
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    with (
        serve("--store", f"sqlite:///{tmp_path / 'store.db'}") as server,
        launch_bridge(
            server.url,
            server.token,
            command=[str(install.launcher)],
            workspace=project,
            state_root=tmp_path / "state",
            env=env,
        ) as bridge,
    ):
        settings = {
            "url": bridge.url,
            "authToken": bridge.auth_token,
            "workspace": str(project),
            "model": MODEL_ID,
            "apiKey": "versions-api-key",
        }
        with LifeCycle(install, settings) as life:
            created = life.step("created")
            first, second = created["first"], created["second"]
            stored = stored_agent(server, first)
            assert stored is not None
            assert (stored["name"], stored["cwd"], stored["status"]) == (
                "first",
                str(project),
                "idle",
            )
            # Bridges before 1.0.30 keep no SDK metadata (an empty object); later ones
            # keep the agent's blob encryption key there.
            if install.writes_sdk_metadata:
                assert stored["sdkMetadata"]["blobEncryptionKey"]
            else:
                assert stored["sdkMetadata"] == {}

            sent = life.step("sent")
            assert sent["status"] == "error"  # the stand-in runs no model
            assert RUN_PATH in cursor_api.paths()
            wait_until(
                lambda: (stored_agent(server, first) or {}).get("activeRunId") is None,
                "the first run is stored as ended",
            )
            (run,) = stored_runs(server, first)
            assert (run["runId"], run["status"], run["turnNumber"]) == (sent["runId"], "error", 1)
            events = server.events(sent["runId"])
            assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
            assert events

            listed = life.step("listed")
            assert len(listed["firstPage"]) == 1
            assert listed["hasNext"]
            # The agent that ran was updated last, so it comes first.
            assert listed["all"] == [first, second]

            got = life.step("got")
            assert (got["agentId"], got["name"], got["cwd"], got["status"]) == (
                first,
                "first",
                str(project),
                "error",
            )

            runs = life.step("runs")
            assert runs["runs"] == [sent["runId"]]
            assert runs["run"] == {"id": sent["runId"], "agentId": first, "status": "error"}
            observed = [offset for kind, offset in runs["observed"] if kind == "sdk_message"]
            assert observed == [event["offset"] for event in events]
            assert runs["observed"][-1][0] == "done"

            assert life.step("archived")["archived"] is True
            assert (stored_agent(server, second) or {})["status"] == "archived"
            assert life.step("unarchived")["archived"] is False
            assert (stored_agent(server, second) or {})["status"] == "idle"

            assert life.step("second sent")["status"] == "error"
            resumed = life.step("resumed")
            assert (resumed["agentId"], resumed["status"]) == (second, "error")
            wait_until(
                lambda: (stored_agent(server, second) or {}).get("activeRunId") is None,
                "the resumed run is stored as ended",
            )
            second_runs = stored_runs(server, second)
            assert [(r["turnNumber"], r["status"]) for r in second_runs] == [
                (1, "error"),
                (2, "error"),
            ]
            assert second_runs[1]["runId"] == resumed["runId"]

            server.call(
                "checkpoints", "create", {"agentId": first, "blobId": "state", "data": "AAEC"}
            )
            deleted = life.step("deleted")
            assert deleted["remaining"] == [second]
            assert stored_agent(server, first) is None
            assert stored_runs(server, first) == []
            assert server.events(sent["runId"]) == []
            # The bridge deleted the agent's blobs with it.
            assert server.client.list_all("checkpoints", {"agentIds": [first]}) == []
            life.finish()
