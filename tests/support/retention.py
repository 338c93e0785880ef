"""A store's worth of old and new agents for the retention tests (prune, gc, --retain).

:func:`seed` writes, through the contract layer as a bridge would, in tenants
``default`` and ``team-b``:

- ``old-archived``: updated a year ago, archived, two finished runs with events and
  two checkpoint blobs (:data:`OLD_BLOB_BYTES` bytes in all): pruned;
- ``old-idle`` in another cwd: pruned unless a filter keeps it;
- ``old-busy``: as old, but one of its runs is still ``running``: never pruned;
- ``fresh``: updated now, with a run, events and a blob: kept;
- ``team-b``'s ``old-archived``: pruned only when every tenant is.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import Stores

DAY_MS = 86_400_000
OTHER_TENANT = "team-b"
OLD_BLOBS = {"blob-a": b"\x00" * 1000, "blob-b": b"\x01" * 24}
OLD_BLOB_BYTES = sum(len(data) for data in OLD_BLOBS.values())
#: Events per run of the seeded agents.
EVENTS_PER_RUN = 3


async def call(stores: Stores, tenant: str, substore: str, method: str, data: Any) -> Any:
    principal = Principal(name="seed", tenant=tenant, scope=Scope.ADMIN)
    output, _ = await call_store(stores, substore, method, data, principal=principal)
    return output


def agent_doc(agent_id: str, *, updated_at: int, status: str, cwd: str) -> dict[str, Any]:
    return {
        "agentId": agent_id,
        "cwd": cwd,
        "status": status,
        "activeRunId": None,
        "name": f"agent {agent_id}",
        "createdAt": updated_at,
        "updatedAt": updated_at,
        "latestCheckpoint": None,
        "sdkMetadata": {"blobEncryptionKey": "00" * 32},
    }


def run_doc(agent_id: str, run_id: str, turn: int, status: str, at: int) -> dict[str, Any]:
    return {
        "runId": run_id,
        "agentId": agent_id,
        "requestId": None,
        "turnNumber": turn,
        "status": status,
        "model": {"id": "composer-2"},
        "result": None,
        "error": None,
        "usageRef": None,
        "usage": None,
        "createdAt": at,
        "updatedAt": at,
        "startedAt": at,
        "endedAt": None,
        "startCheckpointRef": None,
        "latestCheckpointRef": None,
    }


async def add_agent(
    stores: Stores,
    tenant: str,
    agent_id: str,
    *,
    age_days: int,
    status: str = "archived",
    cwd: str = "/work/app",
    runs: tuple[str, ...] = (),
    blobs: dict[str, bytes] | None = None,
) -> None:
    at = int(time.time() * 1000) - age_days * DAY_MS
    doc = agent_doc(agent_id, updated_at=at, status=status, cwd=cwd)
    await call(stores, tenant, "agents", "create", {"agent": doc})
    for turn, run_status in enumerate(runs, start=1):
        run_id = f"{agent_id}-run-{turn}"
        run = run_doc(agent_id, run_id, turn, run_status, at)
        await call(stores, tenant, "runs", "create", {"run": run})
        for number in range(EVENTS_PER_RUN):
            event = {"runId": run_id, "eventType": "run_stream_event", "payload": {"n": number}}
            await call(stores, tenant, "runEvents", "append", event)
    for blob_id, data in (blobs or {}).items():
        blob = {"agentId": agent_id, "blobId": blob_id, "data": base64.b64encode(data).decode()}
        await call(stores, tenant, "checkpoints", "create", blob)


async def seed(stores: Stores) -> None:
    for tenant in ("default", OTHER_TENANT):
        await add_agent(
            stores,
            tenant,
            "old-archived",
            age_days=365,
            runs=("finished", "error"),
            blobs=OLD_BLOBS,
        )
    await add_agent(stores, "default", "old-idle", age_days=200, status="idle", cwd="/work/other")
    await add_agent(stores, "default", "old-busy", age_days=300, runs=("finished", "running"))
    await add_agent(
        stores, "default", "fresh", age_days=0, status="idle", runs=("finished",), blobs={"b": b"x"}
    )


async def agent_ids(stores: Stores, tenant: str = "default") -> set[str]:
    page = await call(stores, tenant, "agents", "list", {"filter": {"limit": 1000}})
    return {agent["agentId"] for agent in page["items"]}


async def holdings(stores: Stores, tenant: str, agent_id: str) -> tuple[int, int, int]:
    """The agent's runs, their events and its blobs, as counts."""
    runs = await call(stores, tenant, "runs", "list", {"filter": {"agentIds": [agent_id]}})
    events = 0
    for run in runs["items"]:
        listed = await call(stores, tenant, "runEvents", "list", {"runId": run["runId"]})
        events += len(listed["items"])
    blobs = await call(stores, tenant, "checkpoints", "list", {"filter": {"agentIds": [agent_id]}})
    return len(runs["items"]), events, len(blobs["items"])


async def event_count(stores: Stores, tenant: str, run_id: str) -> int:
    listed = await call(stores, tenant, "runEvents", "list", {"runId": run_id})
    return len(listed["items"])
