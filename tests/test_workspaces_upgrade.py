"""``db upgrade`` keeps each stored agent whose path is a checkout against its
workspace, and leaves every other agent as it was (docs/team.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.workspaces import segment
from bridge_store.workspaces.paths import Checkout
from tests.support.history import agent
from tests.support.server import StoreHttpClient, serve


def git(*args: str | Path) -> None:
    subprocess.run(["git", *map(str, args)], check=True, capture_output=True, timeout=30)


def test_upgrade_records_the_workspace_of_agents_in_checkouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git("init", "-q", "--bare", tmp_path / "app.git")
    clone = tmp_path / "alice" / "app"
    git("clone", "-q", tmp_path / "app.git", clone)
    (clone / "web").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    link = tmp_path / "link"
    link.symlink_to(clone)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    paths = {
        "in-root": str(clone),
        "in-web": str(clone / "web"),
        "by-link": str(link / "web"),
        "plain": str(plain),
        "gone": str(tmp_path / "deleted" / "app"),
        "relative": "src/app",
    }
    with serve("--store", store) as server:
        for number, (agent_id, cwd) in enumerate(paths.items()):
            server.call(
                "agents", "create", {"agent": agent(agent_id, agent_id, cwd, "idle", number)}
            )

    assert main(["db", "upgrade", "--store", store]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "workspaces: 3 agent(s) now kept against their workspace, 3 keep their path"
    )
    # Once more: nothing left to record, nothing changed.
    assert main(["db", "upgrade", "--store", store]) == 0
    assert "workspaces: 0 agent(s) now kept" in capsys.readouterr().out

    workspace = "local:" + str(tmp_path / "app").lstrip("/")
    bob = Checkout(workspace, "/home/bob/app")
    with serve("--store", store) as server:
        as_bob = StoreHttpClient(segment.store_url(server.url.rstrip("/") + "/", bob), server.token)
        try:
            seen = {
                agent_id: as_bob.call("agents", "get", {"agentId": agent_id})["cwd"]
                for agent_id in paths
            }
        finally:
            as_bob.close()
        # A caller in no checkout sees each where it last worked: its old path.
        plain_view = {
            agent_id: server.call("agents", "get", {"agentId": agent_id})["cwd"]
            for agent_id in paths
        }
    assert seen == {
        "in-root": "/home/bob/app",
        "in-web": "/home/bob/app/web",
        "by-link": "/home/bob/app/web",
        "plain": paths["plain"],
        "gone": paths["gone"],
        "relative": "src/app",
    }
    assert plain_view == paths
