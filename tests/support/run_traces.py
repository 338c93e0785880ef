"""Stores holding runs to export, filled through the contract layer as a bridge fills them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from bridge_store.dispatch import call_store
from bridge_store.plugins import get_plugin_manager
from bridge_store.security.auth import Principal, Scope
from bridge_store.stores import Routes, open_stores
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
