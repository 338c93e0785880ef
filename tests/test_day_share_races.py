"""The per-day sums stay exact under concurrent writers, on SQLite and Postgres.

The overview and ``/metrics`` read revision 0013's ``run_days`` and ``run_agent_days``
instead of the runs, so a lost or doubled update there is a wrong figure on every page
that reads it. Here runs are created, updated in place (status and tokens), moved
(another day and model) and deleted all at once, many calls in flight on the
backend's pool of connections, several of them on the same few rows of the sums (one
day, one model, one agent), and the sums must then equal a read of every run.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.shares import run_shares
from bridge_store.backend.statistics import DAY_MS
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer.costs.breakdown import Window, spans
from bridge_store.viewer.costs.scan import scan

from .test_costs import CREATORS, TENANT, TODAY, context_of, normal, url, writer

__all__ = ["url"]  # the fixture, imported to be used here

RUNS = 120


@pytest.fixture
async def empty(url: str) -> AsyncIterator[OpenStores]:
    stores = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        yield stores
    finally:
        await stores.close()


def fields(rng: random.Random, day: int, model: str) -> dict[str, Any]:
    return {
        "status": rng.choice(["finished", "error", "running"]),
        "model": {"id": model},
        "startedAt": day * DAY_MS + rng.randrange(DAY_MS),
        "usage": {"inputTokens": rng.randrange(1, 10**6), "outputTokens": rng.randrange(10**5)},
    }


async def test_the_sums_stay_exact_under_concurrent_creates_updates_moves_and_deletes(
    empty: OpenStores,
) -> None:
    manager = get_plugin_manager()
    clients = [
        StoreClient(stores=empty.stores, manager=manager, principal=writer(name))
        for name in CREATORS
    ]
    rng = random.Random(41)
    # Two days, two models, three agents: every call lands on one of a few rows.
    docs = {
        f"run-{n:03}": run(
            f"run-{n:03}",
            f"agent-{n % 3}",
            **fields(rng, TODAY - n % 2, ("composer-2", "gpt-5")[n % 2]),
        )
        for n in range(RUNS)
    }

    async def create(n: int, run_id: str) -> None:
        await clients[n % 3].call("runs", "create", {"run": docs[run_id]})

    await asyncio.gather(*(create(n, run_id) for n, run_id in enumerate(docs)))

    async def change(n: int, run_id: str) -> None:
        doc = docs[run_id]
        if n % 4 == 0:  # finished: status and usage change, not its row
            moved = fields(rng, (doc["startedAt"] // DAY_MS), doc["model"]["id"])
            new = {**doc, "status": "error", "usage": moved["usage"]}
        elif n % 4 == 1:  # moved: the other day and model
            day = TODAY - 1 if doc["startedAt"] // DAY_MS == TODAY else TODAY
            model = "gpt-5" if doc["model"]["id"] == "composer-2" else "composer-2"
            new = {**doc, **fields(rng, day, model)}
        elif n % 4 == 2:
            await clients[n % 3].call("runs", "delete", {"filter": {"runIds": [run_id]}})
            del docs[run_id]
            return
        else:
            return
        docs[run_id] = new
        await clients[n % 3].call("runs", "update", {"run": new})

    await asyncio.gather(*(change(n, run_id) for n, run_id in enumerate(list(docs))))
    # And new runs while others move away from their rows.
    more = {
        f"run-new-{n}": run(f"run-new-{n}", "agent-0", **fields(rng, TODAY, "composer-2"))
        for n in range(30)
    }
    docs.update(more)
    await asyncio.gather(
        *(
            clients[n % 3].call("runs", "create", {"run": doc})
            for n, doc in enumerate(more.values())
        )
    )

    index = run_shares(empty.stores.agents, empty.stores.runs)
    assert index is not None
    window = Window(TODAY, 7)
    cut = spans(window, None)
    first, end = window.before().first, TODAY + 1
    context = context_of(empty)
    scanned = await scan(
        context.reader,
        context.activity,
        first_day=first,
        end_day=end,
        counted=(window.first, window.end),
        cut=cut,
        limit=None,
    )
    assert scanned.complete
    days = await index.day_shares(TENANT, first, end)
    assert normal(days) == normal(scanned.day_shares)
    assert normal(await index.agent_shares(TENANT, cut)) == normal(scanned.agent_shares)
    assert sum(share.runs for share in days) == len(docs) == RUNS - RUNS // 4 + 30
    errors = sum(doc["status"] == "error" for doc in docs.values())
    assert sum(share.failed for share in days) == errors
    tokens = sum(doc["usage"]["inputTokens"] for doc in docs.values())
    assert sum(share.tokens[0] for share in days) == tokens
