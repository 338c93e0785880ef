"""Checkouts of one repository are one workspace, through the real bridge.

Alice's, Bob's and CI's clones of one bare repository sit at different paths; a fourth
clone is of another repository. Each launches the real bridge (offline stand-in for the
Cursor API) on one shared store server, in the same sub directory of its checkout.
Bob's bridge lists Alice's agent in his own checkout's path, reads and observes its
run, continues it, archives and deletes it; the third clone's bridge sees nothing.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bridge_store.client import Session, launch
from bridge_store.workspaces.translate import WORKED_IN
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.processes import still_running
from tests.support.server import ServerProcess, serve
from tests.support.stores import serve_arguments

pytestmark = [
    pytest.mark.bridge,
    pytest.mark.slow,
    pytest.mark.usefixtures("the_installed_bridge"),
]

API_KEY = "e2e-api-key"
CONDITION_TIMEOUT_SECONDS = 30.0


def git(*args: str | Path) -> None:
    subprocess.run(["git", *map(str, args)], check=True, capture_output=True, timeout=30)


def clone(bare: Path, where: Path) -> Path:
    """A clone of ``bare`` at ``where``, with the sub directory the agents work in."""
    git("clone", "-q", bare, where)
    (where / "src").mkdir()
    return where


def bare_repository(path: Path) -> Path:
    git("init", "-q", "--bare", path)
    return path


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONDITION_TIMEOUT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


@pytest.fixture(
    params=[
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def shared_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    with serve(*serve_arguments(request.param, request, tmp_path)) as server:
        yield server


def test_three_checkouts_of_one_repository_share_agents_another_repository_sees_none(
    shared_server: ServerProcess, cursor_api: CursorApiStub, tmp_path: Path
) -> None:
    app = bare_repository(tmp_path / "remotes" / "app.git")
    alice_root = clone(app, tmp_path / "alice" / "src" / "app")
    bob_root = clone(app, tmp_path / "bob" / "work" / "app-checkout")
    ci_root = clone(app, tmp_path / "builds" / "org" / "app")
    other_root = clone(bare_repository(tmp_path / "remotes" / "other.git"), tmp_path / "carol")
    home = tmp_path / "home"
    home.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    server = shared_server

    def start(name: str, root: Path) -> Session:
        return launch(
            store_url=server.url,
            auth_token=server.token,
            workspace=root / "src",
            state_root=tmp_path / f"state-{name}",
            env=env,
        )

    with (
        start("alice", alice_root) as alice,
        start("bob", bob_root) as bob,
        start("ci", ci_root) as ci,
        start("carol", other_root) as carol,
    ):
        assert alice.checkout is not None
        assert bob.checkout is not None
        assert alice.checkout.workspace == bob.checkout.workspace
        assert carol.checkout is not None
        assert carol.checkout.workspace != alice.checkout.workspace
        options = alice.agent_options(model=MODEL_ID, api_key=API_KEY)
        made = alice.client.agents.create(options, name="fix login")
        first = made.send("Fix the login redirect").wait()
        assert first.status == "error"  # the offline stand-in runs no model
        wait_until(
            lambda: bob.client.agents.get(made.agent_id).status == "error",
            "Bob sees Alice's run ended",
        )

        # A caller in no checkout (the plain CallStore path) sees where it last
        # worked, and never the field that holds it.
        stored = server.call("agents", "get", {"agentId": made.agent_id})
        assert stored["cwd"] == str(alice_root / "src")
        assert WORKED_IN not in stored

        # Bob lists it in his own checkout's path; the other repository sees none.
        listed = list(bob.client.agents.list().auto_paging_iter())
        assert [(a.agent_id, a.cwd) for a in listed] == [(made.agent_id, str(bob_root / "src"))]
        assert alice.client.agents.get(made.agent_id).cwd == str(alice_root / "src")
        assert list(carol.client.agents.list().auto_paging_iter()) == []

        # Bob reads and observes Alice's run.
        assert [run.id for run in bob.client.agents.list_runs(made.agent_id)] == [first.id]
        observed = list(bob.client.agents.get_run(first.id).observe())
        assert [event.kind for event in observed][-2:] == ["result", "done"]

        # Bob continues it, in his checkout.
        resumed = bob.client.agents.resume(
            made.agent_id, bob.agent_options(model=MODEL_ID, api_key=API_KEY)
        )
        assert resumed.send("Also cover logout").wait().status == "error"
        wait_until(
            lambda: server.call("agents", "get", {"agentId": made.agent_id})["activeRunId"] is None,
            "Bob's follow-up run is stored as ended",
        )
        runs = list(alice.client.agents.list_runs(made.agent_id))
        assert len(runs) == 2
        # The third checkout of the repository sees the agent in its own path, with
        # both runs: Alice's and Bob's.
        listed = list(ci.client.agents.list().auto_paging_iter())
        assert [(a.agent_id, a.cwd) for a in listed] == [(made.agent_id, str(ci_root / "src"))]
        assert len(list(ci.client.agents.list_runs(made.agent_id))) == 2
        stored = server.call("agents", "get", {"agentId": made.agent_id})
        assert stored["cwd"] == str(bob_root / "src")
        assert alice.client.agents.get(made.agent_id).cwd == str(alice_root / "src")

        # Bob archives, then deletes it: gone for Alice too.
        bob.client.agents.archive(made.agent_id)
        assert alice.client.agents.get(made.agent_id).archived
        bob.client.agents.delete(made.agent_id)
        assert list(alice.client.agents.list().auto_paging_iter()) == []
        assert server.call("agents", "get", {"agentId": made.agent_id}) is None
        assert list(carol.client.agents.list().auto_paging_iter()) == []
        assert list(ci.client.agents.list().auto_paging_iter()) == []
        pids = alice.pids + bob.pids + ci.pids + carol.pids
    assert still_running(pids) == []


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_two_sidecars_on_one_store_share_a_workspace(
    kind: str, request: pytest.FixtureRequest, cursor_api: CursorApiStub, tmp_path: Path
) -> None:
    app = bare_repository(tmp_path / "remotes" / "app.git")
    alice_root = clone(app, tmp_path / "alice" / "app")
    bob_root = clone(app, tmp_path / "bob" / "app")
    home = tmp_path / "home"
    home.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    [_, store] = serve_arguments(kind, request, tmp_path)

    def start(name: str, root: Path) -> Session:
        # launch() with no store URL: each starts its own store server on the backend.
        return launch(store, workspace=root / "src", state_root=tmp_path / f"state-{name}", env=env)

    with start("alice", alice_root) as alice, start("bob", bob_root) as bob:
        assert alice.store_url != bob.store_url
        options = alice.agent_options(model=MODEL_ID, api_key=API_KEY)
        made = alice.client.agents.create(options, name="on the file")
        assert made.send("hello").wait().status == "error"
        listed = list(bob.client.agents.list().auto_paging_iter())
        assert [(a.agent_id, a.cwd) for a in listed] == [(made.agent_id, str(bob_root / "src"))]
        bob.client.agents.delete(made.agent_id)
        assert list(alice.client.agents.list().auto_paging_iter()) == []
