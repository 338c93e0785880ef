"""An agent's life cycle through the real bridge on the host, against a store server
in a container, and the history it leaves, read back over CallStore.

The bridge (the installed ``cursor-sdk``'s) runs on the host, its Cursor API the
stand-in (``cursor_api``), its store the container's server at ``url``: what a user
does with the image. The server's answers are checked after each step, as in
tests/test_bridge_e2e.py, whose full life cycle this condenses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge_store.client import launch_bridge, local_options
from testkit.cursor_api import MODEL_ID, RUN_PATH, CursorApiStub
from tests.support.server import StoreHttpClient

API_KEY = "container-api-key"
#: Bridge writes that follow a finished run land within milliseconds; this only bounds
#: how long a broken build takes to fail.
CONDITION_TIMEOUT_SECONDS = 30.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONDITION_TIMEOUT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def history(store: StoreHttpClient) -> dict[str, Any]:
    """Every agent the store holds, with its runs and their events."""
    agents = store.list_all("agents", {"limit": 50})
    runs = {
        agent["agentId"]: store.list_all("runs", {"agentIds": [agent["agentId"]], "limit": 50})
        for agent in agents
    }
    events = {run["runId"]: store.events(run["runId"]) for items in runs.values() for run in items}
    return {"agents": agents, "runs": runs, "events": events}


def life_cycle(url: str, token: str, workspace: Path, cursor_api: CursorApiStub) -> dict[str, Any]:
    """Two agents, runs, archive and unarchive, a delete; the history it leaves."""
    options = {"model": MODEL_ID, "api_key": API_KEY, "local": local_options(workspace)}
    store = StoreHttpClient(url, token)
    try:
        with (
            launch_bridge(
                url, token, workspace=workspace, env=bridge_env(workspace, cursor_api)
            ) as bridge,
            bridge.client() as client,
        ):
            first = client.agents.create(options, name="first")
            second = client.agents.create(options, name="second")
            stored = store.call("agents", "get", {"agentId": first.agent_id})
            assert (stored["name"], stored["cwd"]) == ("first", str(workspace))

            # The stand-in refuses the model call: the run ends in error after its row
            # and its events went through the store.
            result = first.send("hello").wait()
            assert result.status == "error"
            assert RUN_PATH in cursor_api.paths()
            wait_until(
                lambda: (
                    store.call("agents", "get", {"agentId": first.agent_id})["activeRunId"] is None
                ),
                "the run is stored as ended",
            )
            run = store.call("runs", "get", {"agentId": first.agent_id, "runId": result.id})
            assert run["status"] == "error"
            events = store.events(result.id)
            assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
            assert events, "the run stored no events"
            observed = list(client.agents.get_run(result.id).observe())
            assert [e.offset for e in observed if e.kind == "sdk_message"] == [
                e["offset"] for e in events
            ]

            client.agents.archive(second.agent_id)
            assert store.call("agents", "get", {"agentId": second.agent_id})["status"] == "archived"
            client.agents.unarchive(second.agent_id)
            assert second.send("hello").wait().status == "error"
            wait_until(
                lambda: (
                    store.call("agents", "get", {"agentId": second.agent_id})["activeRunId"] is None
                ),
                "the second agent's run is stored as ended",
            )

            # delete: the agent and its runs and events are gone.
            client.agents.delete(first.agent_id)
            assert store.call("agents", "get", {"agentId": first.agent_id}) is None
            assert store.events(result.id) == []
            listed = [agent.agent_id for agent in client.agents.list().auto_paging_iter()]
            assert listed == [second.agent_id]
        return history(store)
    finally:
        store.close()


def assert_history_served(
    url: str, token: str, workspace: Path, cursor_api: CursorApiStub, before: dict[str, Any]
) -> None:
    """The store holds exactly ``before``, and a new bridge serves it."""
    store = StoreHttpClient(url, token)
    try:
        assert history(store) == before
        with (
            launch_bridge(
                url, token, workspace=workspace, env=bridge_env(workspace, cursor_api)
            ) as bridge,
            bridge.client() as client,
        ):
            listed = [agent.agent_id for agent in client.agents.list().auto_paging_iter()]
            assert listed == [agent["agentId"] for agent in before["agents"]]
            (agent_id, runs), *_ = [(a, r) for a, r in before["runs"].items() if r]
            assert [run.id for run in client.agents.list_runs(agent_id)] == [
                run["runId"] for run in runs
            ]
    finally:
        store.close()


def bridge_env(workspace: Path, cursor_api: CursorApiStub) -> dict[str, str]:
    home = workspace.parent / "home"
    home.mkdir(exist_ok=True)
    # A private HOME keeps the bridge's state directory out of the real one.
    return {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
