"""Seeding a store with history to move, and reading all of it back for comparison."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import AgentPosition, BlobRef, RunPosition, agent_position
from bridge_store.backend.substores import run_position as position_of_run
from bridge_store.conformance.harness import UNICODE_TEXT, agent, run
from bridge_store.lifecycle.items import canonical
from bridge_store.stack.stores import OpenStores, Routes, Stores, open_stores
from bridge_store.wire.fields import MAX_LIMIT

T = TypeVar("T")

TENANTS = ("default", "team-b")
T0 = 1_700_000_000_000


def on_stores(routes: Routes, work: Callable[[Stores], Awaitable[T]]) -> T:
    """Run ``work`` on the opened (schema-current) stores of ``routes``."""

    async def main() -> T:
        opened = await open_stores(get_plugin_manager(), routes, migrate=True)
        try:
            return await work(opened.stores)
        finally:
            await opened.close()

    return asyncio.run(main())


async def open_memory() -> OpenStores:
    return await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)


def blob_bytes(agent_number: int, blob_number: int, size: int) -> bytes:
    return bytes((agent_number * 31 + blob_number * 7 + i) % 256 for i in range(size))


async def seed(
    stores: Stores,
    *,
    agents: int = 3,
    runs: int = 2,
    events: int = 5,
    blobs: int = 2,
    blob_size: int = 2000,
    tenants: tuple[str, ...] = TENANTS,
) -> None:
    """Agents with runs, keyed and plain events and blobs, in each tenant.

    Events are appended (the store assigns seq and createdAt); a second tenant reuses
    the same ids, so a copy that mixed tenants up would show.
    """
    for tenant in tenants:
        for a in range(agents):
            agent_id = f"agent-{a}"
            for r in range(runs):
                run_id = f"run-{a}-{r}"
                await stores.runs.create(
                    tenant, run(run_id, agent_id, turn_number=r + 1, status="finished")
                )
                for e in range(events):
                    await stores.run_events.append(
                        tenant,
                        {
                            "runId": run_id,
                            "eventType": "run_stream_event",
                            "payload": {"n": e, "text": UNICODE_TEXT, "tenant": tenant},
                            "payloadRef": None,
                            "idempotencyKey": f"key-{e}" if e % 2 else None,
                            "createdAt": T0 + e,
                        },
                    )
            for b in range(blobs):
                await stores.checkpoints.create(
                    tenant, agent_id, f"blob-{b}", blob_bytes(a, b, blob_size)
                )
            await stores.agents.create(
                tenant, agent(agent_id, updated_at=T0 + a, name=f"{tenant} {a}")
            )


async def snapshot(stores: Stores, tenants: tuple[str, ...] = TENANTS) -> dict[str, Any]:
    """Everything the tenants hold, as canonical JSON text (blobs as hex)."""
    held: dict[str, Any] = {}
    for tenant in tenants:
        after: AgentPosition | None = None
        while page := await stores.agents.list(tenant, cwd=None, after=after, limit=MAX_LIMIT):
            for doc in page:
                held[f"{tenant}/agent/{doc['agentId']}"] = canonical(doc)
            after = agent_position(page[-1])
        after_run: RunPosition | None = None
        while runs := await stores.runs.list(
            tenant, agent_ids=None, run_ids=None, after=after_run, limit=MAX_LIMIT
        ):
            for doc in runs:
                held[f"{tenant}/run/{doc['agentId']}/{doc['runId']}"] = canonical(doc)
                events = await stores.run_events.list(
                    tenant, doc["runId"], after_seq=0, limit=MAX_LIMIT
                )
                held[f"{tenant}/events/{doc['runId']}"] = [canonical(e) for e in events]
            after_run = position_of_run(runs[-1])
        after_blob: BlobRef | None = None
        while refs := await stores.checkpoints.list(
            tenant, agent_ids=None, blob_ids=None, after=after_blob, limit=MAX_LIMIT
        ):
            for ref in refs:
                data = await stores.checkpoints.get(tenant, ref.agent_id, ref.blob_id)
                assert data is not None
                held[f"{tenant}/blob/{ref.agent_id}/{ref.blob_id}"] = data.hex()
            after_blob = refs[-1]
    return held
