"""Stores holding runs to export, filled through the contract layer as a bridge fills them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import Routes, open_stores
from tests.support.history import Call, agent, message, run, text

#: A run whose times are now-ish, so its tool calls (stamped by the server) fall
#: inside it.
NOW_AGENT = "agent-now"
NOW_RUN = "run-now-1"
SECRET_KEY = "5e" * 32


def fill(url: str, calls: Sequence[Call], *, tenant: str = "default", who: str = "alice") -> None:
    """Make every call on the store at ``url`` as token ``who`` of ``tenant``."""

    async def work() -> None:
        opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
        principal = Principal(name=who, tenant=tenant, scope=Scope.ADMIN)
        try:
            for substore, method, data in calls:
                await call_store(opened.stores, substore, method, data, principal=principal)
        finally:
            await opened.close()

    asyncio.run(work())


def now_started() -> int:
    """A run start a second ago: the events the server stamps next fall after it."""
    return int(time.time() * 1000) - 1000


def now_run_calls(started: int) -> list[Call]:
    """An agent and its run started at ``started``: a prompt, a tool call, text."""
    doc = agent(NOW_AGENT, "now agent", "/src/now", "idle", started)
    doc["sdkMetadata"] = {"blobEncryptionKey": SECRET_KEY}
    calls: list[Call] = [("agents", "create", {"agent": doc})]
    calls.append(
        (
            "runs",
            "create",
            {"run": run(NOW_AGENT, NOW_RUN, 1, "running", startedAt=started, createdAt=started)},
        )
    )
    bodies: list[dict[str, Any]] = [
        {"type": "user", "message": {"role": "user", "content": [text("List the files")]}},
        {"type": "tool_call", "call_id": "c1", "name": "list_dir", "status": "running"},
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": "list_dir",
            "status": "completed",
            "args": {"path": "."},
            "result": ["a.py", "b.py"],
        },
        {"type": "assistant", "message": {"role": "assistant", "content": [text("Two files.")]}},
    ]
    calls += [("runEvents", "append", message(NOW_AGENT, NOW_RUN, body)) for body in bodies]
    return calls


def now_run_end(started: int) -> list[Call]:
    """The update that ends :data:`NOW_RUN`, finished with usage, a minute after its
    start (after every event the server stamped meanwhile)."""
    ended = started + 60_000
    usage = {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 3, "cacheWriteTokens": 0}
    doc = run(NOW_AGENT, NOW_RUN, 1, "finished", startedAt=started, createdAt=started)
    doc.update(endedAt=ended, updatedAt=ended, usage=usage)
    return [("runs", "update", {"run": doc})]


def as_a_bridge_writes(calls: Sequence[Call]) -> list[Call]:
    """``calls`` with each run created as running and ended by an update after its
    events, as the bridge does (a run created ended is queued before its events)."""
    created: list[Call] = []
    endings: list[Call] = []
    for substore, method, data in calls:
        run_doc = data.get("run") if method == "create" else None
        if substore == "runs" and run_doc is not None and run_doc["status"] != "running":
            created.append((substore, method, {"run": {**run_doc, "status": "running"}}))
            endings.append(("runs", "update", {"run": run_doc}))
        else:
            created.append((substore, method, data))
    return created + endings


def recorded_writes(path: Path) -> list[Call]:
    """The writes of recorded bridge traffic (a jsonl of CallStore calls), up to its
    ``delete`` step: what a store importing it holds."""
    writes: list[Call] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("step") == "delete":
            break
        if "step" not in record and record["method"] not in ("get", "list"):
            writes.append((record["substore"], record["method"], record["input"]))
    return writes


def retimed(calls: Sequence[Call], started: int, seconds: int = 20) -> list[Call]:
    """``calls`` with every run started at ``started`` (epoch ms) and, if it ended,
    ended ``seconds`` later: runs whose tool calls (stamped by the server as the calls
    go) fall inside them."""
    out: list[Call] = []
    for substore, method, data in calls:
        if substore == "runs" and "run" in data:
            run_doc = {**data["run"], "createdAt": started, "startedAt": started}
            ended = started + seconds * 1000 if run_doc.get("endedAt") is not None else started
            run_doc.update(updatedAt=ended, endedAt=run_doc["endedAt"] and ended)
            data = {**data, "run": run_doc}
        out.append((substore, method, data))
    return out
