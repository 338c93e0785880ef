"""The oldest and the newest published bridges keep a workspace store URL's path.

A workspace travels in the path of ``--store-callback-url`` (``/w/<segment>/``,
bridge_store/workspaces/segment.py): a bridge that posted to the URL's origin alone
would keep every agent by its path. Each bridge here works in a git checkout and is
given the URL ``launch()`` gives; the store then answers another checkout of the
same repository with the agent in that checkout's own path.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bridge_store.client import launch_bridge
from bridge_store.client.workspace import bridge_workspace
from bridge_store.workspaces import segment
from bridge_store.workspaces.paths import Checkout
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.sdk_versions import NEWEST, OLDEST, sdk_install
from tests.support.server import StoreHttpClient, serve
from tests.test_bridge_versions import LifeCycle

pytestmark = [pytest.mark.bridge, pytest.mark.slow]


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_a_published_bridge_keeps_the_workspace_in_its_store_url(
    version: str, tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    install = sdk_install(version)
    bare, checkout = tmp_path / "app.git", tmp_path / "alice" / "app"
    for argv in (["init", "-q", "--bare", bare], ["clone", "-q", bare, checkout]):
        subprocess.run(["git", *map(str, argv)], check=True, capture_output=True, timeout=30)
    (checkout / "src").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    with serve("--store", f"sqlite:///{tmp_path / 'store.db'}") as server:
        where = bridge_workspace(server.url, checkout / "src")
        assert where.checkout is not None
        with launch_bridge(
            where.store_url,
            server.token,
            command=[str(install.launcher)],
            workspace=where.directory,
            state_root=tmp_path / "state",
            env=env,
        ) as bridge:
            settings = {
                "url": bridge.url,
                "authToken": bridge.auth_token,
                "workspace": where.directory,
                "model": MODEL_ID,
                "apiKey": "versions-api-key",
            }
            with LifeCycle(install, settings) as life:
                # Created through the workspace URL, or kept by its path: another
                # checkout tells them apart. (cursor-sdk 0.1.9's bridge drops the
                # connection of a send in any git checkout, with or without a
                # workspace, so the runs are the newest bridge's, in the e2e test.)
                created = life.step("created")
                elsewhere = Checkout(where.checkout.workspace, "/home/bob/elsewhere")
                bob = StoreHttpClient(
                    segment.store_url(server.url.rstrip("/") + "/", elsewhere),
                    server.token,
                )
                try:
                    got = [
                        bob.call("agents", "get", {"agentId": agent_id})["cwd"]
                        for agent_id in (created["first"], created["second"])
                    ]
                    listed = bob.call(
                        "agents", "list", {"filter": {"cwd": "/home/bob/elsewhere/src"}}
                    )
                finally:
                    bob.close()
                assert got == ["/home/bob/elsewhere/src"] * 2
                assert {item["agentId"] for item in listed["items"]} == {
                    created["first"],
                    created["second"],
                }
