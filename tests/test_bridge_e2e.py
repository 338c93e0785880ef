"""The real bridge, end to end.

Starts the store server (``bridge-store serve``) and a stand-in Cursor API, launches
the real ``cursor-sdk-bridge`` pointed at the store, and drives an agent's whole life
cycle through the ``cursor_sdk`` client. After each step the store server is asked
directly over CallStore what it now holds; finally the store server restarts and the
history is still there, for the store and for a new bridge. The life cycle runs on every
durable store kind, on a private Redis Cluster, and on SQLite under ``serve --workers
2``. Then the one-step launch: two sessions sharing one store, and a session whose
bridge or store is killed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cursor_sdk
import cursor_sdk.errors
import httpx
import pytest

from bridge_store.client import BridgeProcess, Session, launch, launch_bridge, local_options
from bridge_store.security.auth import SHORTHAND_TOKEN_NAME
from bridge_store_s3.keys import Layout
from bridge_store_s3.settings import parse_url
from testkit.cursor_api import MODEL_ID, RUN_PATH, CursorApiStub
from tests.support.bridge_js import BridgeStoreClient, blob
from tests.support.processes import still_running
from tests.support.sdk_versions import current_install
from tests.support.server import ServerProcess, serve
from tests.support.stores import (
    DURABLE_STORE_KINDS,
    REDIS_CLUSTER_KIND,
    TWO_WORKERS_KIND,
    serve_arguments,
)

pytestmark = [
    pytest.mark.bridge,
    pytest.mark.slow,
    pytest.mark.usefixtures("the_installed_bridge"),
]

API_KEY = "e2e-api-key"
#: Bridge writes that follow a finished run land within milliseconds; this only bounds
#: how long a broken build takes to fail.
CONDITION_TIMEOUT_SECONDS = 30.0

StoreArgs = list[str]


@pytest.fixture(params=[*DURABLE_STORE_KINDS, REDIS_CLUSTER_KIND, TWO_WORKERS_KIND])
def store_args(request: pytest.FixtureRequest, tmp_path: Path) -> StoreArgs:
    """``bridge-store serve`` arguments for a fresh, durable store."""
    return serve_arguments(request.param, request, tmp_path)


def blob_objects_in_s3(
    request: pytest.FixtureRequest, store_args: StoreArgs, agent_id: str
) -> int | None:
    """How many blob objects the agent has in the bucket; None when blobs are not on S3."""
    flag = "--checkpoints" if "--checkpoints" in store_args else "--store"
    url = store_args[store_args.index(flag) + 1]
    if not url.startswith("s3://"):
        return None
    prefix = Layout(parse_url(url).prefix).blobs_of_agent(agent_id)
    return len(request.getfixturevalue("s3_server").keys(prefix))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def bridge_env(tmp_path: Path, cursor_api: CursorApiStub) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    # A private HOME keeps the bridge's state directory out of the real one.
    return {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}


def start_bridge(server: ServerProcess, project: Path, env: dict[str, str]) -> BridgeProcess:
    return launch_bridge(
        server.url, server.token, workspace=project, state_root=project.parent / "state", env=env
    )


# -- reading the store directly -------------------------------------------------------


def store_agents(server: ServerProcess, page_size: int = 50) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    filter_: dict[str, Any] = {"limit": page_size}
    while True:
        page = server.call("agents", "list", {"filter": filter_})
        items += page["items"]
        if "nextCursor" not in page:
            return items
        filter_ = {"limit": page_size, "cursor": page["nextCursor"]}


def store_runs(server: ServerProcess, agent_id: str) -> list[dict[str, Any]]:
    page = server.call("runs", "list", {"filter": {"agentIds": [agent_id], "limit": 1000}})
    assert "nextCursor" not in page
    items: list[dict[str, Any]] = page["items"]
    return items


def store_events(server: ServerProcess, run_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"runId": run_id}
    while True:
        page = server.call("runEvents", "list", request)
        items += page["items"]
        if "nextOffset" not in page:
            return items
        request = {"runId": run_id, "afterOffset": page["nextOffset"]}


def store_checkpoints(server: ServerProcess, agent_id: str) -> list[str]:
    page = server.call("checkpoints", "list", {"filter": {"agentIds": [agent_id], "limit": 1000}})
    assert "nextCursor" not in page
    blob_ids: list[str] = page["items"]
    return blob_ids


def snapshot(server: ServerProcess) -> dict[str, Any]:
    """Everything the store holds, reachable from its agents."""
    agents = store_agents(server)
    runs = {agent["agentId"]: store_runs(server, agent["agentId"]) for agent in agents}
    return {
        "agents": agents,
        "runs": runs,
        "events": {
            run["runId"]: store_events(server, run["runId"])
            for agent_runs in runs.values()
            for run in agent_runs
        },
        "checkpoints": {
            agent["agentId"]: store_checkpoints(server, agent["agentId"]) for agent in agents
        },
    }


def assert_created_by_the_token(server: ServerProcess, agent_id: str) -> None:
    """The agent and each of its runs name the token the bridge wrote them with, in the
    viewer's JSON, while every read above got the bridge's documents back unchanged."""
    headers = {"Authorization": f"Bearer {server.token}"}
    page = httpx.get(f"{server.url}ui/agent?id={agent_id}&format=json", headers=headers)
    assert page.status_code == 200, page.text
    data = page.json()
    assert data["agent"]["createdBy"] == SHORTHAND_TOKEN_NAME
    assert data["runs"]
    assert {run["createdBy"] for run in data["runs"]} == {SHORTHAND_TOKEN_NAME}


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONDITION_TIMEOUT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def assert_event_log(events: list[dict[str, Any]], run_id: str) -> None:
    """One run's events: numbered 1, 2, 3 ... with no gaps, offsets the decimal seq."""
    assert events, f"run {run_id} has no events"
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert [event["offset"] for event in events] == [str(event["seq"]) for event in events]
    assert {event["runId"] for event in events} == {run_id}


# -- the life cycle -------------------------------------------------------------------


def test_agent_life_cycle_through_the_real_bridge(
    request: pytest.FixtureRequest,
    store_args: StoreArgs,
    cursor_api: CursorApiStub,
    project: Path,
    bridge_env: dict[str, str],
) -> None:
    cwd = str(project)
    agent_options: dict[str, Any] = {
        "model": MODEL_ID,
        "api_key": API_KEY,
        "local": local_options(project),
    }

    with (
        serve(*store_args) as server,
        start_bridge(server, project, bridge_env) as bridge,
        bridge.client() as client,
    ):
        # create agent: the bridge stores the agent document it made.
        first = client.agents.create(agent_options, name="first")
        stored = server.call("agents", "get", {"agentId": first.agent_id})
        assert stored is not None
        assert (stored["agentId"], stored["name"], stored["cwd"]) == (first.agent_id, "first", cwd)
        assert stored["status"] == "idle"
        assert stored["sdkMetadata"]["blobEncryptionKey"]
        second = client.agents.create(agent_options, name="second")
        assert {agent["agentId"] for agent in store_agents(server)} == {
            first.agent_id,
            second.agent_id,
        }

        # send: the stand-in refuses the model call, so the run ends in error after
        # its row and its events went through the store.
        result = first.send("hello").wait()
        assert result.status == "error"
        assert RUN_PATH in cursor_api.paths()
        run_id = result.id
        wait_until(
            lambda: server.call("agents", "get", {"agentId": first.agent_id})["status"] == "error",
            "the first agent's status is stored as error",
        )
        stored_run = server.call("runs", "get", {"agentId": first.agent_id, "runId": run_id})
        assert stored_run is not None
        assert stored_run["status"] == "error"
        assert stored_run["model"] == {"id": MODEL_ID}
        assert stored_run["endedAt"] is not None
        assert server.call("agents", "get", {"agentId": first.agent_id})["activeRunId"] is None
        events = store_events(server, run_id)
        assert_event_log(events, run_id)

        # list agents, one per page: the bridge pages with the store's cursors.
        page = client.agents.list(limit=1)
        assert len(page.items) == 1
        assert page.has_next_page()
        listed = [agent.agent_id for agent in page.auto_paging_iter()]
        assert listed == [agent["agentId"] for agent in store_agents(server)]
        # The agent that ran was updated last, so it comes first.
        assert listed == [first.agent_id, second.agent_id]

        # get agent
        info = client.agents.get(first.agent_id)
        assert (info.agent_id, info.name, info.cwd, info.status) == (
            first.agent_id,
            "first",
            cwd,
            "error",
        )

        # list runs: what the store holds for the agent.
        runs = client.agents.list_runs(first.agent_id)
        assert [run.id for run in runs] == [
            run["runId"] for run in store_runs(server, first.agent_id)
        ]
        assert run_id in [run.id for run in runs]

        # get run
        fetched = client.agents.get_run(run_id)
        assert (fetched.id, fetched.agent_id, fetched.status) == (run_id, first.agent_id, "error")

        # observe run: the stored events replayed, at the stored offsets.
        observed = list(fetched.observe())
        assert [event.offset for event in observed if event.kind == "sdk_message"] == [
            event["offset"] for event in events
        ]
        assert observed[-1].kind == "done"

        # archive, unarchive
        client.agents.archive(second.agent_id)
        assert server.call("agents", "get", {"agentId": second.agent_id})["status"] == "archived"
        assert client.agents.get(second.agent_id).archived
        client.agents.unarchive(second.agent_id)
        assert server.call("agents", "get", {"agentId": second.agent_id})["status"] == "idle"
        assert not client.agents.get(second.agent_id).archived

        # resume: the bridge refuses a follow-up run while the agent's stored active
        # run is unfinished, so the second agent runs once first. Then its handle is
        # closed, it is resumed from the store, and its next run lands under it as
        # turn 2.
        assert second.send("hello").wait().status == "error"
        wait_until(
            lambda: (
                server.call("agents", "get", {"agentId": second.agent_id})["activeRunId"] is None
            ),
            "the second agent's run is stored as ended",
        )
        second.close()
        resumed = client.agents.resume(second.agent_id, agent_options)
        assert resumed.agent_id == second.agent_id
        resumed_run = resumed.send("again").wait()
        assert resumed_run.status == "error"
        wait_until(
            lambda: (
                server.call("agents", "get", {"agentId": second.agent_id})["activeRunId"] is None
            ),
            "the resumed agent's run is stored as ended",
        )
        second_runs = store_runs(server, second.agent_id)
        assert [(run["turnNumber"], run["status"]) for run in second_runs] == [
            (1, "error"),
            (2, "error"),
        ]
        assert second_runs[1]["runId"] == resumed_run.id
        for run in second_runs:
            assert_event_log(store_events(server, run["runId"]), run["runId"])

        # The offline bridge writes no checkpoint blobs (no model answers), so the
        # blobs a model's turns would leave are written through the bridge's own
        # store client; on the Postgres + S3 route they land in the bucket.
        blobs = {"root": os.urandom(64 * 1024), "empty": b""}
        with BridgeStoreClient(current_install().bridge_dir, server.url, server.token, cwd) as js:
            for blob_id, data in blobs.items():
                js.store(
                    "checkpoints",
                    "create",
                    {"agentId": first.agent_id, "blobId": blob_id, "data": blob(data)},
                )
        assert store_checkpoints(server, first.agent_id) == sorted(blobs)
        in_s3 = blob_objects_in_s3(request, store_args, first.agent_id)
        if in_s3 is not None:
            assert in_s3 == len(blobs)

        # delete: the agent, its runs, their events and its checkpoints are gone.
        first_runs = [run["runId"] for run in store_runs(server, first.agent_id)]
        client.agents.delete(first.agent_id)
        assert server.call("agents", "get", {"agentId": first.agent_id}) is None
        assert store_runs(server, first.agent_id) == []
        assert all(store_events(server, run) == [] for run in first_runs)
        assert store_checkpoints(server, first.agent_id) == []
        if in_s3 is not None:
            assert blob_objects_in_s3(request, store_args, first.agent_id) == 0
        assert [agent["agentId"] for agent in store_agents(server)] == [second.agent_id]
        assert_created_by_the_token(server, second.agent_id)

        before_restart = snapshot(server)

    # restart: a new store server process on the same store finds the same history,
    # and a new bridge pointed at it serves it.
    with (
        serve(*store_args) as server,
        start_bridge(server, project, bridge_env) as bridge,
        bridge.client() as client,
    ):
        assert snapshot(server) == before_restart
        assert_created_by_the_token(server, second.agent_id)
        assert [agent.agent_id for agent in client.agents.list().auto_paging_iter()] == [
            second.agent_id
        ]
        assert [run.id for run in client.agents.list_runs(second.agent_id)] == [
            run["runId"] for run in before_restart["runs"][second.agent_id]
        ]
        replayed = list(client.agents.get_run(resumed_run.id).observe())
        assert [event.offset for event in replayed if event.kind == "sdk_message"] == [
            event["offset"] for event in before_restart["events"][resumed_run.id]
        ]


# -- two launches, one store ---------------------------------------------------------


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL two store servers can share: one SQLite file, or one database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url: str = request.getfixturevalue("make_postgres_url")()
    return url


def test_two_launches_on_one_store_see_each_others_agents(
    shared_store: str,
    cursor_api: CursorApiStub,
    project: Path,
    bridge_env: dict[str, str],
) -> None:
    def start(name: str) -> Session:
        return launch(
            shared_store,
            workspace=project,
            state_root=project.parent / f"state-{name}",
            env=bridge_env,
        )

    with start("a") as session_a, start("b") as session_b:
        client_a, client_b = session_a.client, session_b.client
        assert session_a.store_url != session_b.store_url
        options = session_a.agent_options(model=MODEL_ID, api_key=API_KEY)
        made_by_a = client_a.agents.create(options, name="made by A")
        made_by_b = client_b.agents.create(options, name="made by B")

        for client in (client_a, client_b):
            listed = {agent.agent_id for agent in client.agents.list().auto_paging_iter()}
            assert listed == {made_by_a.agent_id, made_by_b.agent_id}
        assert client_b.agents.get(made_by_a.agent_id).name == "made by A"
        assert client_a.agents.get(made_by_b.agent_id).name == "made by B"

        # A run made through bridge A, read back through bridge B.
        result = made_by_a.send("hello").wait()
        assert result.status == "error"
        wait_until(
            lambda: client_b.agents.get(made_by_a.agent_id).status == "error",
            "bridge B sees the run of bridge A's agent ended",
        )
        assert [run.id for run in client_b.agents.list_runs(made_by_a.agent_id)] == [result.id]
        observed = list(client_b.agents.get_run(result.id).observe())
        assert [event.kind for event in observed][-2:] == ["result", "done"]
        assert any(event.kind == "sdk_message" for event in observed)

        # Bridge B deletes bridge A's agent; bridge A no longer finds it.
        client_b.agents.delete(made_by_a.agent_id)
        remaining = [agent.agent_id for agent in client_a.agents.list().auto_paging_iter()]
        assert remaining == [made_by_b.agent_id]
        pids = session_a.pids + session_b.pids
    assert still_running(pids) == []


# -- a child dies mid-session ---------------------------------------------------------


@pytest.mark.parametrize("victim", ["bridge", "store"])
def test_a_dead_bridge_or_store_is_named_and_nothing_is_left(
    victim: str, tmp_path: Path, project: Path, bridge_env: dict[str, str]
) -> None:
    pids: list[int] = []

    def session_that_loses(victim: str) -> None:
        with launch(
            f"sqlite:///{tmp_path / 'store.db'}", workspace=project, env=bridge_env
        ) as session:
            pids.extend(session.pids)
            options = session.agent_options(model=MODEL_ID, api_key=API_KEY)
            session.client.agents.create(options, name="before")
            assert session.sidecar is not None
            os.kill(
                session.bridge.pid if victim == "bridge" else session.sidecar.process.pid,
                signal.SIGKILL,
            )
            session.client.agents.create(options, name="after")

    with pytest.raises(cursor_sdk.errors.CursorAgentError) as raised:
        session_that_loses(victim)
    notes = getattr(raised.value, "__notes__", [])
    if victim == "bridge":
        # The SDK cannot reach the bridge; the note says why.
        assert isinstance(raised.value, cursor_sdk.errors.NetworkError)
        assert notes[0].startswith(
            f"bridge-store: cursor-sdk-bridge (pid {pids[2]}) exited with status 137"
        )
    else:
        # The bridge answers, but its store call failed; the note says which process died.
        assert notes[0].startswith(
            f"bridge-store: the store server (pid {pids[0]}) was killed by SIGKILL"
        )
    assert len(notes) == 1
    assert still_running(pids) == []
