"""The real bridge after retention: what prune and gc kept reads as before, what they
took is gone, and the bridge's session goes on (a stand-in Cursor API, as in
tests/test_bridge_e2e.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import cursor_sdk.errors
import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import main
from bridge_store.client import launch
from bridge_store.stack.stores import Routes, open_stores
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.retention import DAY_MS

pytestmark = [
    pytest.mark.bridge,
    pytest.mark.slow,
    pytest.mark.usefixtures("the_installed_bridge"),
]

API_KEY = "retention-api-key"


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("make_postgres_url")()
    return url


def backdate(store_url: str, agent_id: str, days: int) -> None:
    """Make the agent look untouched for ``days``, as a store months old would hold it."""

    async def work() -> None:
        opened = await open_stores(get_plugin_manager(), Routes.single(store_url), migrate=False)
        try:
            agent = await opened.stores.agents.get("default", agent_id)
            assert agent is not None
            agent["updatedAt"] -= days * DAY_MS
            await opened.stores.agents.update("default", agent)
        finally:
            await opened.close()

    asyncio.run(work())


def test_the_bridge_reads_what_prune_kept(
    store_url: str, cursor_api: CursorApiStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    with launch(store_url, workspace=project, state_root=tmp_path / "state", env=env) as session:
        client = session.client
        options = session.agent_options(model=MODEL_ID, api_key=API_KEY)
        old = client.agents.create(options, name="last touched in spring")
        kept = client.agents.create(options, name="in use")
        old_run = old.send("hello").wait()
        kept_run = kept.send("hello").wait()
        observed_before = [event.kind for event in client.agents.get_run(kept_run.id).observe()]
        assert observed_before[-2:] == ["result", "done"]

        backdate(store_url, old.agent_id, 200)
        assert main(["prune", "--store", store_url, "--older-than", "90d"]) == 0
        assert capsys.readouterr().out.startswith("pruned 1 agent older than 90d: 1 run ")
        assert main(["gc", "--store", store_url]) == 0
        assert "deleted 0 orphaned blobs, 0 runs and the events of 0 runs" in (
            capsys.readouterr().out
        )

        listed = [agent.agent_id for agent in client.agents.list().auto_paging_iter()]
        assert listed == [kept.agent_id]
        assert client.agents.get(kept.agent_id).name == "in use"
        assert [run.id for run in client.agents.list_runs(kept.agent_id)] == [kept_run.id]
        observed = [event.kind for event in client.agents.get_run(kept_run.id).observe()]
        assert observed == observed_before
        with pytest.raises(cursor_sdk.errors.CursorAgentError):
            client.agents.get(old.agent_id)
        assert old_run.id != kept_run.id
        # The session goes on: the kept agent takes another turn.
        again = kept.send("once more").wait()
        assert [run.id for run in client.agents.list_runs(kept.agent_id)] == [
            kept_run.id,
            again.id,
        ]
