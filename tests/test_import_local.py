"""``bridge-store import-local``: the bridge's own stores, imported, read by the bridge.

Histories are written by the real bridge offline into its default SQLite store and
into a JSONL store (``tests/support/builtin_history.py``), with a finished run and a
checkpoint blob written by the SDK's own store classes. The sources' documents are
checked against what the SDK's own store classes read from the same files; the
import goes into every durable kind of store, and a bridge on bridge-store then shows
the same agents, runs and observed events as a bridge on its own store showed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import main
from bridge_store.client import bridge_path, launch_bridge
from bridge_store.errors import EXIT_CONFIGURATION
from bridge_store.lifecycle.builtin_jsonl import JsonlStore
from bridge_store.lifecycle.builtin_sqlite import SqliteStore
from bridge_store.lifecycle.items import AgentItem, BlobItem, EventsItem, Item, RunItem
from bridge_store.security.encryption import is_sealed_blob, is_sealed_metadata, load_keyring
from bridge_store.security.sealed_stores import seal_stores
from bridge_store.stack.stores import Routes, resolve
from testkit.cursor_api import CursorApiStub
from tests.support.bridge_js import BridgeStoreClient, bridge_directory, unblob
from tests.support.builtin_history import (
    CHECKPOINT,
    History,
    agent_options,
    builtin_bridge,
    make_history,
    sdk_documents,
    sdk_view,
)
from tests.support.sdk_versions import BRIDGE_OVERRIDES
from tests.support.server import serve
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments

pytestmark = [pytest.mark.bridge, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def the_installed_bridge() -> Iterator[None]:
    """The bridge under test is the installed cursor-sdk's, whatever the environment says."""
    with pytest.MonkeyPatch.context() as patch:
        for name in BRIDGE_OVERRIDES:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="module")
def sqlite_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return make_history(tmp_path_factory.mktemp("sqlite"), None)


@pytest.fixture(scope="module")
def jsonl_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    root = tmp_path_factory.mktemp("jsonl")
    return make_history(root, {"type": "jsonl", "rootDir": str(root / "store")})


async def read_blob(item: BlobItem) -> bytes | None:
    return await item.read()


def documents(items: Iterator[Item]) -> dict[str, Any]:
    """Items gathered as :func:`sdk_documents` gathers the SDK's reading."""
    read: dict[str, Any] = {"agents": [], "runs": [], "events": {}, "blobs": {}}
    run_agents: dict[str, str] = {}
    done: set[str] = set()  # agents already read: their history must come before them
    for item in items:
        assert item.tenant == "team"
        if isinstance(item, AgentItem):
            read["agents"].append(item.document)
            read["blobs"].setdefault(item.document["agentId"], {})
            done.add(item.document["agentId"])
        elif isinstance(item, RunItem):
            assert item.document["agentId"] not in done
            run_agents[item.document["runId"]] = item.document["agentId"]
            read["runs"].append(item.document)
        elif isinstance(item, EventsItem):
            assert run_agents[item.run_id] not in done
            read["events"].setdefault(item.run_id, []).extend(item.events)
        elif isinstance(item, BlobItem):
            assert item.agent_id not in done
            blobs = read["blobs"].setdefault(item.agent_id, {})
            blobs[item.blob_id] = asyncio.run(read_blob(item))
    return read


def by_id(documents: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {document[key]: document for document in documents}


def fingerprint(directory: Path) -> dict[str, str]:
    """Each store file's digest: what reading must leave as it was.

    Not the ``-shm`` index and empty ``-wal`` files, which any SQLite reader of a WAL
    database may create (the bridge's own readers too); they hold no rows.
    """
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.name.endswith("-shm") and path.stat().st_size
    }


def test_sqlite_rows_read_as_the_sdk_reads_them(sqlite_history: History, tmp_path: Path) -> None:
    stores = sqlite_history.sqlite_stores()
    assert len(stores) == 2  # one per workspace
    for directory in stores:
        before = fingerprint(directory)
        ours = documents(SqliteStore(directory).items("team"))
        assert fingerprint(directory) == before  # read in place, changed nothing
        assert ours["agents"], directory
        # The SDK's own class opens its files for writing: give it a copy of them all.
        copy = tmp_path / directory.name
        shutil.copytree(directory, copy)
        workspace = ours["agents"][0]["cwd"]
        sdk = sdk_documents(sqlite_history, {"type": "sqlite", "stateRoot": str(copy)}, workspace)
        assert by_id(ours["agents"], "agentId") == by_id(sdk["agents"], "agentId")
        assert ours["events"] == {run: events for run, events in sdk["events"].items() if events}
        assert ours["blobs"] == sdk["blobs"]
        sdk_runs = by_id(sdk["runs"], "runId")
        for run in ours["runs"]:
            # A failed run's file row keeps no end time, which the SDK's class reads as
            # null; over CallStore (and in its JSONL store) the bridge sends the time
            # it failed, its last update. The import writes what the bridge sends.
            if run["status"] == "error":
                assert sdk_runs[run["runId"]]["endedAt"] is None
                assert run["endedAt"] == run["updatedAt"]
                run = {**run, "endedAt": None}
            assert run == sdk_runs.pop(run["runId"])
        assert not sdk_runs
    workspace, agent_id, blob_id = sqlite_history.blob
    assert blob_id == hashlib.sha256(CHECKPOINT).hexdigest()
    (directory,) = [d for d in stores if (d / "agents").is_dir()]
    assert documents(SqliteStore(directory).items("team"))["blobs"][agent_id] == {
        blob_id: CHECKPOINT
    }


def test_jsonl_lines_read_as_the_sdk_reads_them(jsonl_history: History) -> None:
    assert jsonl_history.local_store is not None
    directory = Path(jsonl_history.local_store["rootDir"])
    before = fingerprint(directory)
    ours = documents(JsonlStore(directory).items("team"))
    assert fingerprint(directory) == before
    sdk = sdk_documents(jsonl_history, jsonl_history.local_store, str(jsonl_history.workspaces[0]))
    assert by_id(ours["agents"], "agentId") == by_id(sdk["agents"], "agentId")
    assert by_id(ours["runs"], "runId") == by_id(sdk["runs"], "runId")
    assert ours["events"] == {run: events for run, events in sdk["events"].items() if events}
    assert ours["blobs"] == sdk["blobs"]
    # A failed run's end: the same as the bridge's SQLite store gives after conversion.
    failed = [run for run in ours["runs"] if run["status"] == "error"]
    assert failed
    assert all(run["endedAt"] == run["updatedAt"] for run in failed)
    _, agent_id, blob_id = jsonl_history.blob
    assert ours["blobs"][agent_id] == {blob_id: CHECKPOINT}


def import_local(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["import-local", *args])
    return status, capsys.readouterr().out


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_imported_history_reads_the_same_through_the_bridge(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sqlite_history: History,
    jsonl_history: History,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store_args = serve_arguments(kind, request, tmp_path)
    assert jsonl_history.local_store is not None
    jsonl_dir = jsonl_history.local_store["rootDir"]
    # The default place: every workspace under ~/.cursor/projects.
    monkeypatch.setenv("HOME", str(sqlite_history.home))
    status, out = import_local(*store_args, capsys=capsys)
    assert status == 0, out
    status, out = import_local(*store_args, "--jsonl", jsonl_dir, capsys=capsys)
    assert status == 0, out
    imported = int(out.split()[1].rstrip(","))
    assert imported > 0
    # Importing again imports nothing new.
    status, out = import_local(
        *store_args, "--from", str(sqlite_history.home), "--jsonl", jsonl_dir, capsys=capsys
    )
    assert status == 0, out
    assert out.startswith("imported 0, already present ")
    assert ", different 0," in out

    with serve(*store_args) as server, CursorApiStub() as api:
        env = {"CURSOR_BACKEND_URL": api.url, "HOME": str(tmp_path / "home")}
        for workspace in sqlite_history.workspaces + jsonl_history.workspaces:
            with (
                launch_bridge(server.url, server.token, workspace=workspace, env=env) as bridge,
                bridge.client() as client,
            ):
                seen = sdk_view(client, workspace)
            history = sqlite_history if workspace in sqlite_history.workspaces else jsonl_history
            assert len(seen["agents"]) >= 3
            assert any(len(events) >= 5 for events in seen["events"].values())
            assert seen == history.views[str(workspace)]
        # The checkpoints, through the bridge's own store client and run bookkeeping: the
        # agent points at its blob, and the blob's bytes are the ones the SDK saved.
        for history in (sqlite_history, jsonl_history):
            cwd, agent_id, blob_id = history.blob
            with BridgeStoreClient(
                bridge_directory(bridge_path()), server.url, server.token, cwd
            ) as node:
                agent = node.platform("store", "getAgent", agent_id)
                assert agent["latestCheckpointRef"]["blobId"] == blob_id
                got = node.store("checkpoints", "get", {"agentId": agent_id, "blobId": blob_id})
                assert unblob(got) == CHECKPOINT


def test_import_beside_a_running_bridge_then_again_after_it_wrote_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bridge keeps its store open (rows in the WAL) and goes on writing during and
    after an import; a second import brings only what is new."""
    history = History(
        root=tmp_path, home=tmp_path / "home", workspaces=[tmp_path / "ws"], local_store=None
    )
    history.home.mkdir()
    (workspace,) = history.workspaces
    workspace.mkdir()
    target = ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    source = ["--from", str(history.home)]
    with (
        CursorApiStub() as api,
        builtin_bridge(history, workspace, api) as bridge,
        bridge.client() as client,
    ):
        agent = client.agents.create(agent_options(workspace, None), name="busy")
        agent.send("hello").wait()
        (directory,) = history.sqlite_stores()
        assert (directory / "index.db-wal").stat().st_size > 0  # the rows are in the WAL
        status, out = import_local(*target, *source, capsys=capsys)
        assert (status, out.splitlines()[0]) == (
            0,
            "imported 5, already present 0, different 0, replaced 0",
        )  # the agent, its run and the run's 3 events
        # Not locked out: the bridge writes on, and the next import brings the new run;
        # the agent changed meanwhile, so it differs until --overwrite replaces it.
        agent.send("again").wait()
        status, out = import_local(*target, *source, capsys=capsys)
        assert (status, out.splitlines()[0]) == (
            1,
            "imported 4, already present 4, different 1, replaced 0",
        )
        assert f"agent {agent.agent_id} of tenant default differs" in out
        status, out = import_local(*target, *source, "--overwrite", capsys=capsys)
        assert (status, out.splitlines()[0]) == (
            0,
            "imported 0, already present 8, different 0, replaced 1",
        )


def test_older_sqlite_files_without_the_later_columns(
    sqlite_history: History, tmp_path: Path
) -> None:
    """Files of older bridges lack columns added later; they read as null, as the SDK
    (which adds them, empty, when it opens such a file) reads them."""
    (directory,) = [d for d in sqlite_history.sqlite_stores() if (d / "agents").is_dir()]
    older = tmp_path / "older"
    shutil.copytree(directory, older)
    with contextlib.closing(sqlite3.connect(older / "index.db")) as index:
        index.execute("DROP INDEX IF EXISTS run_events_idempotency_key_idx")
        for table, column in (
            ("runs", "request_id"),
            ("runs", "model_params_json"),
            ("runs", "result"),
            ("runs", "usage_json"),
            ("run_events", "idempotency_key"),
        ):
            index.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    ours = documents(SqliteStore(older).items("team"))
    assert all(run["requestId"] is None and run["usage"] is None for run in ours["runs"])
    assert any(run["model"] == {"id": "composer-2"} for run in ours["runs"])
    sdk_copy = tmp_path / "sdk"
    shutil.copytree(older, sdk_copy)
    sdk = sdk_documents(
        sqlite_history, {"type": "sqlite", "stateRoot": str(sdk_copy)}, ours["agents"][0]["cwd"]
    )
    sdk_runs = by_id(sdk["runs"], "runId")
    for run in ours["runs"]:
        if run["status"] == "error":
            run = {**run, "endedAt": None}  # as in test_sqlite_rows_read_as_the_sdk_reads_them
        assert run == sdk_runs[run["runId"]]
    assert ours["events"] == {run: events for run, events in sdk["events"].items() if events}


def test_jsonl_last_line_unfinished_is_skipped_a_bad_line_before_it_is_refused(
    jsonl_history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert jsonl_history.local_store is not None
    source = Path(jsonl_history.local_store["rootDir"])
    unfinished = tmp_path / "unfinished"
    shutil.copytree(source, unfinished)
    events = unfinished / "run_events.ndjson"
    lines = events.read_bytes().splitlines(keepends=True)
    # A write the bridge did not finish: half a line at the end, which it skips too.
    events.write_bytes(b"".join(lines) + lines[0][: len(lines[0]) // 2])
    assert documents(JsonlStore(unfinished).items("team")) == documents(
        JsonlStore(source).items("team")
    )
    target = ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    status, out = import_local(*target, "--jsonl", str(unfinished), capsys=capsys)
    assert status == 0, out
    # The same half line before the last one: the bridge cannot read the file either.
    events.write_bytes(lines[0][: len(lines[0]) // 2] + b"\n" + b"".join(lines))
    assert main(["import-local", *target, "--jsonl", str(unfinished)]) == EXIT_CONFIGURATION
    assert capsys.readouterr().err == (
        f"bridge-store: cannot import {events}: line 1 is not a record the bridge writes\n"
    )


def test_history_goes_to_the_tenant_named(
    jsonl_history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert jsonl_history.local_store is not None
    url = f"sqlite:///{tmp_path / 'store.db'}"
    jsonl = ["--jsonl", jsonl_history.local_store["rootDir"]]
    status, out = import_local("--store", url, *jsonl, "--tenant", "team-a", capsys=capsys)
    assert status == 0, out
    assert out.splitlines()[-1].startswith("into tenant team-a: its tokens read it")
    _, agent_id, _ = jsonl_history.blob
    # Read without --tenant, the store says where its history is and how to choose.
    assert main(["agents", "--store", url]) == 0
    shown = capsys.readouterr()
    assert shown.out.splitlines()[1:] == []  # the header row alone
    assert shown.err == (
        "bridge-store: no agents: tenant default holds none of it; this store holds history "
        "in tenant team-a: choose one with --tenant team-a (import-local writes to tenant "
        "default unless given --tenant)\n"
    )
    assert main(["runs", agent_id, "--store", url]) == 1
    assert "; this store holds history in tenant team-a: choose one with --tenant team-a" in (
        capsys.readouterr().err
    )
    assert main(["agents", "--store", url, "--tenant", "team-a", "--json"]) == 0
    shown = capsys.readouterr()
    assert agent_id in shown.out
    assert shown.err == ""

    async def held(tenant: str) -> tuple[bool, bool]:
        started = await resolve(get_plugin_manager(), Routes.single(url)).start(migrate=False)
        try:
            stores = started.stores
            agent = await stores.agents.get(tenant, agent_id)
            blobs = await stores.checkpoints.list(
                tenant, agent_ids=[agent_id], blob_ids=None, after=None, limit=10
            )
            return agent is not None, bool(blobs)
        finally:
            await started.close()

    assert asyncio.run(held("team-a")) == (True, True)
    assert asyncio.run(held("default")) == (False, False)


def test_secrets_are_sealed_with_the_store_key_file(
    jsonl_history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With serve's --encryption-key-file, sdkMetadata and blobs reach the backend sealed."""
    assert jsonl_history.local_store is not None
    keys = tmp_path / "store.keys"
    assert main(["keys", "generate", "--encryption-key-file", str(keys)]) == 0
    url = f"sqlite:///{tmp_path / 'store.db'}"
    jsonl = ["--jsonl", jsonl_history.local_store["rootDir"]]
    status, out = import_local(
        "--store", url, *jsonl, "--encryption-key-file", str(keys), capsys=capsys
    )
    assert status == 0, out
    _, agent_id, blob_id = jsonl_history.blob

    async def stored() -> tuple[Any, bytes | None, Any, bytes | None]:
        started = await resolve(get_plugin_manager(), Routes.single(url)).start(migrate=False)
        try:
            raw, sealed = started.stores, seal_stores(started.stores, load_keyring(keys))
            raw_agent = await raw.agents.get("default", agent_id)
            agent = await sealed.agents.get("default", agent_id)
            assert raw_agent is not None
            assert agent is not None
            return (
                raw_agent["sdkMetadata"],
                await raw.checkpoints.get("default", agent_id, blob_id),
                agent["sdkMetadata"],
                await sealed.checkpoints.get("default", agent_id, blob_id),
            )
        finally:
            await started.close()

    raw_metadata, raw_blob, metadata, blob = asyncio.run(stored())
    assert is_sealed_metadata(raw_metadata)
    assert raw_blob is not None
    assert is_sealed_blob(raw_blob)
    assert blob == CHECKPOINT
    source = documents(JsonlStore(Path(jsonl_history.local_store["rootDir"])).items("team"))
    assert metadata == by_id(source["agents"], "agentId")[agent_id]["sdkMetadata"]
