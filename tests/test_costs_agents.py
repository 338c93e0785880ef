"""The overview's agents: ranked from the agents of the selected window only.

The SQL backend reads, of the window before, only the shares of agents that also have
runs in the selected window (``agents_from``), and the by-agent table adds them up in
one pass. Over a store with agents in one window, the other or both, ties, runs
without usage, models with and without a price (which changes inside the window),
and runs outside both windows, on SQLite and Postgres: the shares read are the full
read's shares of those agents, and the table equals the one made the plain way
(every share priced and grouped into Figures, ranked by ``Figures.sort_key``).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.shares import RunShares, Share, run_shares
from bridge_store.backend.statistics import DAY_MS
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.pricing.book import PriceBook
from bridge_store.pricing.table import PriceTable
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.types import Document
from bridge_store.viewer.costs.breakdown import (
    TOP_AGENTS,
    Window,
    _rows,
    by_agent,
    grouped,
    spans,
    with_costs,
)

TENANT = "team-a"
TODAY = 20_600  # 2026-05-27
PRICES = """
currency = "USD"
[[models."composer-2"]]
until = 2026-05-20
input = 1
output = 10
[[models."composer-2"]]
from = 2026-05-20
input = 2
output = 20
cache_read = 0.5
cache_write = 1
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    found: str = request.getfixturevalue("make_postgres_url")()
    return found


def fields(day: int, rng: random.Random, **more: Any) -> dict[str, Any]:
    usage = rng.choice([None, {"inputTokens": rng.randrange(3_000), "outputTokens": 40}])
    return {
        "status": rng.choice(["finished", "error"]),
        "model": rng.choice([{"id": "composer-2"}, {"id": "gpt-5"}, None]),
        "startedAt": day * DAY_MS + rng.randrange(DAY_MS),
        "usage": usage,
        **more,
    }


async def write(opened: OpenStores) -> None:
    rng = random.Random(41)
    principal = Principal(name="alice", tenant=TENANT, scope=Scope.WRITE)
    client = StoreClient(stores=opened.stores, manager=get_plugin_manager(), principal=principal)
    now, before = Window(TODAY, 30), Window(TODAY, 30).before()
    runs: list[tuple[str, dict[str, Any]]] = []
    for n in range(30):  # the selected window only: more than the table names
        runs += [(f"now-{n:02}", fields(rng.randrange(now.first, now.end), rng))]
    for n in range(6):  # both windows, several runs each
        for _ in range(3):
            runs += [(f"both-{n}", fields(rng.randrange(before.first, now.end), rng))]
        runs += [(f"both-{n}", fields(rng.randrange(now.first, now.end), rng))]
    for n in range(10):  # the window before only
        runs += [(f"before-{n}", fields(rng.randrange(before.first, before.end), rng))]
    for n in range(4):  # equal in every figure: the order they were met in decides
        tie = {"model": {"id": "composer-2"}, "usage": {"inputTokens": 500}, "status": "finished"}
        runs += [(f"tie-{n}", fields(TODAY - 3, rng, **tie))]
        runs += [(f"tie-{n}", fields(before.first + 2, rng, **tie))]
    # Outside both windows, and without a time at all (day 0).
    runs += [("late", fields(TODAY + 4, rng)), ("early", fields(before.first - 5, rng))]
    runs += [("no-time", {**fields(TODAY, rng), "startedAt": None})]
    for n, (agent, values) in enumerate(runs):
        await client.call("runs", "create", {"run": run(f"run-{n:03}", agent, **values)})


@pytest.fixture
async def opened(url: str) -> AsyncIterator[OpenStores]:
    stores = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        await write(stores)
        yield stores
    finally:
        await stores.close()


def plain_by_agent(
    shares: list[Share], cut: list[tuple[int, int]], window: Window, prices: PriceTable | None
) -> Document:
    """The by-agent table made the plain way: each share priced on its span's first day,
    grouped per agent into Figures, ranked costliest first by a stable sort."""
    priced = with_costs(shares, prices, day=lambda share: cut[share.at][0])
    now = grouped(priced, window, prices, lambda share: share.who)
    before = grouped(priced, window.before(), prices, lambda share: share.who)
    rows, others = _rows(
        now, before, prices is not None, lambda agent: {"agentId": agent}, TOP_AGENTS
    )
    return {"rows": rows, "others": others, "agents": len(now)}


def index_of(opened: OpenStores) -> RunShares:
    index = run_shares(opened.stores.agents, opened.stores.runs)
    assert index is not None
    return index


@pytest.mark.parametrize("days", [7, 30])
@pytest.mark.parametrize("with_prices", [True, False])
async def test_the_agents_of_the_window_ranked_as_from_every_share(
    opened: OpenStores, tmp_path: Path, days: int, with_prices: bool
) -> None:
    prices = None
    if with_prices:
        (tmp_path / "prices.toml").write_text(PRICES)
        prices = PriceBook.read(tmp_path / "prices.toml").table
        assert prices is not None
    window = Window(TODAY, days)
    cut = spans(window, prices)
    index = index_of(opened)
    every = await index.agent_shares(TENANT, cut)
    read = await index.agent_shares(TENANT, cut, agents_from=window.first)
    # The selected window's shares, and of the window before those of its agents only.
    later = {at for at, (first, _) in enumerate(cut) if first >= window.first}
    ranked = {share.who for share in every if share.at in later}
    assert sorted(read, key=repr) == sorted(
        (share for share in every if share.who in ranked), key=repr
    )
    assert len(read) < len(every)  # the window before's other agents were left out
    table = by_agent(read, cut, window, prices)
    assert table == plain_by_agent(every, cut, window, prices)
    assert table["agents"] == len(ranked)
    if days == 30:
        assert table["others"] is not None
        assert table["others"]["count"] == len(ranked) - 20
        ties = [row["agentId"] for row in table["rows"] if row["agentId"].startswith("tie-")]
        assert ties == ["tie-0", "tie-1", "tie-2", "tie-3"]
        both = [row for row in table["rows"] if row["agentId"].startswith("both-")]
        assert any(row["previous"]["runs"] for row in both)
