"""``bridge-store copy``'s summary counts each item once, also when the source is written
during the copy (issue 21: "agents 53 (51 created, 2 same)" where --verify counted 51)."""

from __future__ import annotations

import asyncio
import time

import pytest

from bridge_store.backend.substores import SUBSTORE_NAMES
from bridge_store.lifecycle import walk
from bridge_store.lifecycle.copy import copy_history
from bridge_store.lifecycle.tally import Outcome
from bridge_store.lifecycle.verify import census
from bridge_store.stack.stores import Stores
from tests.support.lifecycle import TENANTS, open_memory, seed

AGENTS = 30


async def _touch_agents_and_append(source: Stores, stop: asyncio.Event) -> None:
    """Update agents (moving them to the front of the list order) and append to their
    runs while the copy runs, some before the copy reaches them, some after."""
    number = 0
    while not stop.is_set():
        for tenant in TENANTS:
            agent_id = f"agent-{(number * 7) % AGENTS}"
            doc = await source.agents.get(tenant, agent_id)
            assert doc is not None
            doc["updatedAt"] = int(time.time() * 1000)
            doc["name"] = f"touched {number}"
            await source.agents.update(tenant, doc)
            await source.run_events.append(
                tenant,
                {
                    "runId": f"run-{(number * 7) % AGENTS}-0",
                    "eventType": "live",
                    "payload": number,
                    "payloadRef": None,
                    "idempotencyKey": None,
                    "createdAt": 0,
                },
            )
        number += 1
        await asyncio.sleep(0)


async def test_copy_summary_counts_each_item_once_while_the_source_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small pages, so agents touched meanwhile move past the copy's cursor.
    monkeypatch.setattr(walk, "PAGE", 3)
    source_opened, target_opened = await open_memory(), await open_memory()
    source, target = source_opened.stores, target_opened.stores
    await seed(source, agents=AGENTS, runs=2, events=20, blobs=1)
    stop = asyncio.Event()
    writer = asyncio.create_task(_touch_agents_and_append(source, stop))
    tally = await copy_history(source, target, tenants=None, overwrite=False)
    stop.set()
    await writer
    held = await census(target, TENANTS)
    # What the copy says it did is what the target holds: each item counted once.
    for name in SUBSTORE_NAMES:
        assert tally.items(name) == held.counts[name], (name, tally.summary())
    assert tally.items("agents") == len(TENANTS) * AGENTS
    assert tally.counts["agents"][Outcome.CREATED] == len(TENANTS) * AGENTS
    # The copy's own earlier writes are not differences of the target.
    assert tally.total(Outcome.DIFFERENT) == 0
    assert tally.differences == []
    for opened in (source_opened, target_opened):
        await opened.close()
