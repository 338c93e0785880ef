"""The real bridge reads history that was copied and restored.

History made by the real bridge on a SQLite store served with one key file is copied
to the team route (Postgres rows and events, S3 blobs) under another key file, then
exported and imported into a fresh SQLite file. A new bridge on each result lists
the same agents and runs, replays the same events at the same offsets, reads the
same checkpoint blob, and continues the agent: its next run is turn 2, its events
numbered from 1 again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.client import local_options
from bridge_store.security.encryption import new_key_line
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.bridge_js import BridgeStoreClient, blob, unblob
from tests.support.sdk_versions import current_install
from tests.support.server import serve
from tests.test_bridge_e2e import API_KEY, start_bridge, wait_until

pytestmark = [
    pytest.mark.bridge,
    pytest.mark.slow,
    pytest.mark.usefixtures("the_installed_bridge"),
    pytest.mark.postgres,
    pytest.mark.s3,
]


def key_file(path: Path) -> Path:
    path.write_text(new_key_line() + "\n")
    return path


def seen_through_the_sdk(
    store: list[str], project: Path, env: dict[str, str], blob_agent: str
) -> dict[str, Any]:
    """What a new bridge on ``store`` shows: agents, runs, replayed offsets, the blob."""
    with (
        serve(*store) as server,
        start_bridge(server, project, env) as bridge,
        bridge.client() as client,
    ):
        agents = [(a.agent_id, a.name, a.status) for a in client.agents.list().auto_paging_iter()]
        runs = {
            agent_id: [(run.id, run.status) for run in client.agents.list_runs(agent_id)]
            for agent_id, _, _ in agents
        }
        offsets = {
            run_id: [
                event.offset
                for event in client.agents.get_run(run_id).observe()
                if event.kind == "sdk_message"
            ]
            for agent_runs in runs.values()
            for run_id, _ in agent_runs
        }
        with BridgeStoreClient(
            current_install().bridge_dir, server.url, server.token, str(project)
        ) as js:
            found = js.store("checkpoints", "get", {"agentId": blob_agent, "blobId": "root"})
        return {"agents": agents, "runs": runs, "offsets": offsets, "blob": unblob(found)}


def test_the_bridge_reads_copied_and_restored_history(
    request: pytest.FixtureRequest, tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "home").mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(tmp_path / "home")}
    keys = {name: key_file(tmp_path / f"{name}.keys") for name in ("sqlite", "team", "restored")}
    sqlite = ["--store", f"sqlite:///{tmp_path / 'solo.db'}"]
    postgres = request.getfixturevalue("make_postgres_url")()
    s3 = request.getfixturevalue("make_s3_url")()
    team = ["--store", postgres, "--checkpoints", s3]
    restored = ["--store", f"sqlite:///{tmp_path / 'restored.db'}"]
    options: dict[str, Any] = {
        "model": MODEL_ID,
        "api_key": API_KEY,
        "local": local_options(project),
    }
    checkpoint = os.urandom(48 * 1024)

    solo = [*sqlite, "--encryption-key-file", str(keys["sqlite"])]
    with (
        serve(*solo) as server,
        start_bridge(server, project, env) as bridge,
        bridge.client() as client,
    ):
        first = client.agents.create(options, name="first")
        run = first.send("hello").wait()
        assert run.status == "error"
        wait_until(
            lambda: client.agents.get(first.agent_id).status == "error",
            "the run is stored as ended",
        )
        with BridgeStoreClient(
            current_install().bridge_dir, server.url, server.token, str(project)
        ) as js:
            js.store(
                "checkpoints",
                "create",
                {"agentId": first.agent_id, "blobId": "root", "data": blob(checkpoint)},
            )
    before = seen_through_the_sdk(solo, project, env, first.agent_id)
    assert before["blob"] == checkpoint
    assert before["offsets"][run.id]

    def flags(end: str, store: list[str], keys_path: Path) -> list[str]:
        renamed = [f"--{end}" if f == "--store" else f.replace("--", f"--{end}-", 1) for f in store]
        return [*renamed, f"--{end}-encryption-key-file", str(keys_path)]

    assert (
        main(
            [
                "copy",
                "--verify",
                *flags("from", sqlite, keys["sqlite"]),
                *flags("to", team, keys["team"]),
            ]
        )
        == 0
    )
    on_team = [*team, "--encryption-key-file", str(keys["team"])]
    assert seen_through_the_sdk(on_team, project, env, first.agent_id) == before

    archive = tmp_path / "backup.tar.gz"
    assert main(["export", *on_team, "--output", str(archive)]) == 0
    on_restored = [*restored, "--encryption-key-file", str(keys["restored"])]
    assert main(["import", *on_restored, "--input", str(archive), "--verify"]) == 0
    assert seen_through_the_sdk(on_restored, project, env, first.agent_id) == before

    # The restored agent goes on: its next run is turn 2, with a log of its own.
    with (
        serve(*on_restored) as server,
        start_bridge(server, project, env) as bridge,
        bridge.client() as client,
    ):
        resumed = client.agents.resume(first.agent_id, options)
        again = resumed.send("again").wait()
        assert again.status == "error"
        wait_until(
            lambda: (
                server.call("agents", "get", {"agentId": first.agent_id})["activeRunId"] is None
            ),
            "the resumed run is stored as ended",
        )
        stored = server.call("runs", "list", {"filter": {"agentIds": [first.agent_id]}})
        assert [r["turnNumber"] for r in stored["items"]] == [1, 2]
        events = server.call("runEvents", "list", {"runId": again.id})["items"]
        assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
