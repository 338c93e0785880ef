"""Real histories in the bridge's own stores, and what the SDK shows of them.

:func:`make_history` runs the real ``cursor-sdk-bridge`` offline (the stand-in Cursor
API) with ``HOME`` in a temporary directory and no store server, so it keeps agents,
runs and events in its default SQLite store, or in a JSONL store when given one. The
stand-in refuses model calls, so no run finishes and no checkpoint is written: a
finished run with a checkpoint blob is then written by the SDK's own store classes
(``SqliteLocalAgentStore``, ``JsonlLocalAgentStore``) on the bundled Node
(:class:`~tests.support.bridge_js.LocalStoreClient`). :func:`sdk_view` is what a
bridge shows of a history through the Python SDK, for comparing before and after.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cursor_sdk

from bridge_store.client import BRIDGE_READY_PREFIX, BridgeProcess, bridge_endpoint, bridge_path
from bridge_store.client._process import START_TIMEOUT_SECONDS, start
from bridge_store.lifecycle.builtin_sqlite import find_stores
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support.bridge_js import (
    BridgeStoreClient,
    LocalStoreClient,
    bridge_directory,
    message,
    unblob,
)

API_KEY = "import-local-api-key"
#: Two workspaces (one path with a space): the default store keeps one store each.
WORKSPACES = ("alpha", "beta two")
CHECKPOINT = os.urandom(200 * 1000)
USAGE = {
    "inputTokens": 1200,
    "outputTokens": 345,
    "cacheReadTokens": 2**40,
    "cacheWriteTokens": 0,
    "totalTokens": 2**40 + 1545,
}


@dataclass
class History:
    """A built-in store a real bridge wrote, and what the SDK showed of it."""

    root: Path
    home: Path
    workspaces: list[Path]
    #: ``--local-store`` JSON, None for the default SQLite store.
    local_store: dict[str, str] | None
    #: Per workspace: what a bridge on this store showed (:func:`sdk_view`).
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The agent and blob the SDK's store classes wrote: (workspace, agentId, blobId).
    blob: tuple[str, str, str] = ("", "", "")

    def sqlite_stores(self) -> list[Path]:
        return find_stores(self.home)


def builtin_bridge(history: History, workspace: Path, api: CursorApiStub) -> BridgeProcess:
    """The real bridge on its own store (no store server), offline, ``HOME`` private."""
    argv = [bridge_path(), "--workspace", str(workspace)]
    if history.local_store is not None:
        argv += ["--local-store", json.dumps(history.local_store)]
    env = {**os.environ, "HOME": str(history.home), "CURSOR_BACKEND_URL": api.url}
    process, pump, ready = start(
        argv, env, BRIDGE_READY_PREFIX, None, START_TIMEOUT_SECONDS, "cursor-sdk-bridge", 10.0
    )
    url, token = bridge_endpoint(ready)
    return BridgeProcess(
        process=process, ready=ready, pump=pump, url=url, auth_token=token, store_url=""
    )


def agent_options(workspace: Path, local_store: dict[str, str] | None) -> dict[str, Any]:
    local: dict[str, Any] = {"cwd": str(workspace)}
    if local_store is not None:
        local["store"] = local_store
    return {"model": MODEL_ID, "api_key": API_KEY, "local": local}


def _listed(page: Any) -> Iterator[Any]:
    while True:
        yield from page.items
        if not page.has_next_page():
            return
        page = page.get_next_page()


def sdk_view(client: cursor_sdk.Client, workspace: Path) -> dict[str, Any]:
    """Every agent of ``workspace`` a bridge lists, its runs and their observed events."""
    agents = {
        agent.agent_id: agent
        for agent in _listed(client.agents.list())
        if agent.cwd == str(workspace)
    }
    runs: dict[str, Any] = {}
    events: dict[str, Any] = {}
    for agent_id in agents:
        listed = [
            client.agents.get_run(run.id) for run in _listed(client.agents.list_runs(agent_id))
        ]
        runs[agent_id] = [_run_view(run) for run in listed]
        for run in listed:
            # An agent created and never sent to keeps a queued first run: observing
            # it would wait for it to start.
            if run.status != "running":
                events[run.id] = list(client.agents.get_run(run.id).observe())
    return {
        "agents": agents,
        "got": {agent_id: client.agents.get(agent_id) for agent_id in agents},
        "runs": runs,
        "events": events,
    }


def _run_view(run: Any) -> dict[str, Any]:
    fields = ("id", "agent_id", "status", "result", "model", "duration_ms", "git", "created_at")
    return {name: getattr(run, name) for name in fields} | {"usage": run.usage}


def _life(client: cursor_sdk.Client, workspace: Path, local_store: dict[str, str] | None) -> None:
    options = agent_options(workspace, local_store)
    first = client.agents.create(options, name="first")
    first.send("hello").wait()
    first.send("again").wait()
    second = client.agents.create(options, name=f"second in {workspace.name}")
    second.send("hello").wait()
    client.agents.archive(second.agent_id)
    client.agents.create(options, name="never ran")


def _finish_a_run(node: BridgeStoreClient, workspace: Path) -> tuple[str, str]:
    """What the SDK writes for a run a model finished, with its checkpoint blob."""
    created = node.platform(
        "store", "createAgent", {"workspaceRef": str(workspace), "name": "finished"}
    )
    agent_id, run_id = created["agent"]["agentId"], created["run"]["runId"]
    node.platform("store", "markRunStarting", agent_id, run_id)
    ref = node.platform("checkpointStore", "saveCheckpoint", agent_id, message(CHECKPOINT))
    node.platform("store", "patchCheckpoint", agent_id, run_id, ref)
    node.platform(
        "store",
        "markRunTerminal",
        agent_id,
        run_id,
        {"status": "FINISHED", "result": "All tests pass.", "usage": USAGE},
    )
    return agent_id, ref["blobId"]


def make_history(root: Path, local_store: dict[str, str] | None) -> History:
    """A built-in store with agents in two workspaces, written by the real bridge."""
    home = root / "home"
    home.mkdir(parents=True)
    workspaces = [root / name for name in WORKSPACES]
    for workspace in workspaces:
        workspace.mkdir()
    history = History(root=root, home=home, workspaces=workspaces, local_store=local_store)
    with CursorApiStub() as api:
        for workspace in workspaces:
            with builtin_bridge(history, workspace, api) as bridge, bridge.client() as client:
                _life(client, workspace, local_store)
        workspace = workspaces[0]
        store = local_store
        if store is None:
            (state_root,) = [s for s in history.sqlite_stores() if _workspace_of(s) == workspace]
            store = {"type": "sqlite", "stateRoot": str(state_root)}
        bridge_dir = bridge_directory(bridge_path())
        with LocalStoreClient(bridge_dir, store, str(workspace)) as node:
            agent_id, blob_id = _finish_a_run(node, workspace)
        history.blob = (str(workspace), agent_id, blob_id)
        for workspace in workspaces:
            with builtin_bridge(history, workspace, api) as bridge, bridge.client() as client:
                history.views[str(workspace)] = sdk_view(client, workspace)
    return history


def _workspace_of(store: Path) -> Path:
    """The workspace a default store belongs to, from its one agent's ``cwd``."""
    with contextlib.closing(
        sqlite3.connect(f"file:{store / 'index.db'}?mode=ro", uri=True)
    ) as index:
        (cwd,) = index.execute("SELECT workspace_ref FROM agents LIMIT 1").fetchone()
    return Path(cwd)


def sdk_documents(history: History, store: dict[str, str], workspace: str) -> dict[str, Any]:
    """What the SDK's own store class reads from a built-in store, as CallStore documents."""
    with LocalStoreClient(bridge_directory(bridge_path()), store, workspace) as node:
        agents = node.store("agents", "list", {"filter": {"limit": 10_000}})["items"]
        runs = node.store("runs", "list", {"filter": {"limit": 10_000}})["items"]
        events = {
            run["runId"]: node.store("runEvents", "list", {"runId": run["runId"], "limit": 10_000})[
                "items"
            ]
            for run in runs
        }
        blobs = {
            agent["agentId"]: {
                blob_id: unblob(
                    node.store(
                        "checkpoints", "get", {"agentId": agent["agentId"], "blobId": blob_id}
                    )
                )
                for blob_id in node.store(
                    "checkpoints", "list", {"filter": {"agentIds": [agent["agentId"]]}}
                )["items"]
            }
            for agent in agents
        }
    return {"agents": agents, "runs": runs, "events": events, "blobs": blobs}
