"""Who spent what: the SQL backend's per-day sums and the scan agree, and the overview
prices them with the table of the moment.

A tenant's runs by several creators (token names) and agents, over two months, of
several models and statuses, some moved to another day or model, some deleted, are
summed by revision 0012's tables (kept by triggers on ``runs``) and by reading the
runs (the scan every other backend's overview uses): the day and agent shares must be
equal, on SQLite and Postgres. The overview then prices them: a run at the price in
force on its day, a model without a price as unpriced with its tokens, the window
against the one before, by agent and by creator, the month against the budget; and a
new price table re-prices all of it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import QueryParams

from bridge_store.backend.history import run_history
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.shares import Share, run_shares
from bridge_store.backend.statistics import DAY_MS, run_statistics
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.pricing.book import PriceBook
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer import pages
from bridge_store.viewer.activity import Activity
from bridge_store.viewer.costs.breakdown import Window, spans
from bridge_store.viewer.costs.scan import scan
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.search import ScanSearch

TENANT = "team-a"
TODAY = 20_600  # 2026-05-27
CREATORS = ("alice", "bob", "ci")


def writer(name: str, tenant: str = TENANT) -> Principal:
    return Principal(name=name, tenant=tenant, scope=Scope.WRITE)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    found: str = request.getfixturevalue("make_postgres_url")()
    return found


def usage(rng: random.Random) -> dict[str, int] | None:
    return rng.choice(
        [
            None,
            {"inputTokens": rng.randrange(2_000_000), "outputTokens": rng.randrange(90_000)},
            {"inputTokens": 1_000_000, "cacheReadTokens": 500_000, "cacheWriteTokens": 7},
        ]
    )


async def write(opened: OpenStores, rng: random.Random) -> None:
    manager = get_plugin_manager()
    clients = {
        name: StoreClient(stores=opened.stores, manager=manager, principal=writer(name))
        for name in CREATORS
    }
    for n in range(120):
        client = clients[rng.choice(CREATORS)]
        agent_id, run_id = f"agent-{n % 7}", f"run-{n:03}"
        start = (TODAY - rng.randrange(-2, 70)) * DAY_MS + rng.randrange(DAY_MS)
        fields: dict[str, Any] = {
            "status": rng.choice(["finished", "error", "running", "cancelled"]),
            "model": rng.choice([{"id": "composer-2"}, {"id": "gpt-5"}, {"id": "<b>x</b>"}, None]),
            "startedAt": start,
            "usage": usage(rng),
        }
        await client.call("runs", "create", {"run": run(run_id, agent_id, **fields)})
        change = rng.random()
        if change < 0.2:  # finishes later: its status and usage change, not its day
            fields.update(status="error", usage=usage(rng))
        elif change < 0.35:  # moved: another day and model
            fields.update(startedAt=start - 3 * DAY_MS, model={"id": "gpt-5"})
        if change < 0.35:
            await client.call("runs", "update", {"run": run(run_id, agent_id, **fields)})
    # Deleted runs leave no trace in the sums; another tenant's runs are not ours.
    await clients["ci"].call("runs", "delete", {"filter": {"runIds": ["run-003", "run-010"]}})
    other = dataclasses.replace(clients["ci"], principal=writer("ci", "team-b"))
    await other.call("runs", "create", {"run": run("run-x", "agent-0", startedAt=TODAY * DAY_MS)})


@pytest.fixture
async def opened(url: str) -> AsyncIterator[OpenStores]:
    stores = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        await write(stores, random.Random(11))
        yield stores
    finally:
        await stores.close()


def activity_of(opened: OpenStores, *, indexed: bool) -> Activity:
    stores = opened.stores
    if not indexed:
        return Activity(lambda: stores, TENANT)
    return Activity(
        lambda: stores,
        TENANT,
        history=lambda: run_history(stores.agents, stores.runs),
        statistics=lambda: run_statistics(stores.agents, stores.runs),
        shares=lambda: run_shares(stores.agents, stores.runs),
    )


def context_of(
    opened: OpenStores, prices: PriceBook | None = None, *, indexed: bool = True
) -> pages.Context:
    principal = writer("alice")
    reader = HistoryReader(in_process(lambda: opened.stores, principal))
    activity = activity_of(opened, indexed=indexed)
    return pages.Context(reader, ScanSearch(reader), activity, principal, prices, scan_limit=None)


def normal(shares: list[Share]) -> list[Share]:
    return sorted(shares, key=repr)


async def test_the_sums_the_backend_keeps_are_what_reading_the_runs_sums(
    opened: OpenStores,
) -> None:
    index = run_shares(opened.stores.agents, opened.stores.runs)
    assert index is not None
    window = Window(TODAY, 30)
    cut = spans(window, None)
    first, end = window.before().first - 10, TODAY + 3
    days = await index.day_shares(TENANT, first, end)
    agents = await index.agent_shares(TENANT, cut)
    context = context_of(opened)
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
    assert normal(days) == normal(scanned.day_shares)
    assert normal(agents) == normal(scanned.agent_shares)
    assert {share.who for share in days} == set(CREATORS)
    assert sum(share.runs for share in days) > 60
    # Every tenant's days, for /metrics: team-b's one run is there, under its own name.
    tenants = await index.tenant_shares(TODAY, TODAY + 1)
    assert {tenant for tenant, _ in tenants} == {TENANT, "team-b"}
    seen = {use.model: use for use in await index.models_seen()}
    assert set(seen) == {"composer-2", "gpt-5", "<b>x</b>"}
    assert seen["gpt-5"].last_day <= TODAY + 2


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
[budgets]
team-a = 50
"""


async def test_the_overview_prices_each_day_at_its_price_and_names_what_is_unpriced(
    opened: OpenStores, tmp_path: Path
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(PRICES)
    book = PriceBook.read(path)
    context = context_of(opened, book)
    params = QueryParams({"days": "30", "to": "2026-05-27"})
    data = (await pages.overview(context, params)).data
    json.loads(json.dumps(data, allow_nan=False))  # valid JSON, no float anywhere in money
    assert data["method"] == "index"
    assert data["prices"]["version"]["digest"] == book.table.version.digest  # type: ignore[union-attr]
    month = data["windows"]["30"]
    # gpt-5 and "<b>x</b>" have no price: unpriced, with their tokens, never zero.
    models = {row["model"]: row for row in month["byModel"]}
    assert models["gpt-5"]["cost"] is None
    assert models["gpt-5"]["unpriced"]["runs"] == models["gpt-5"]["runs"]
    assert models["gpt-5"]["tokens"]["inputTokens"] > 0
    assert month["unpriced"] == ["(none)", "<b>x</b>", "gpt-5"]
    # The same figures read by the scan, and the scan priced the same way.
    scanned = (await pages.overview(context_of(opened, book, indexed=False), params)).data
    assert scanned["method"] == "scan"
    for key in ("windows", "byAgent", "byCreator", "budget", "charts"):
        assert scanned[key] == data[key], key
    # Each day at its own price: a composer-2 run before 2026-05-20 at 1/10 per million,
    # from then on at 2/20/0.5/1 (thousandths of a unit per million, in integers).
    by_hand = 0
    async for batch in context.reader.every_run():
        for one in batch:
            day = one["startedAt"] // DAY_MS
            if (one.get("model") or {}).get("id") != "composer-2" or not one["usage"]:
                continue
            if not Window(TODAY, 30).holds(day):
                continue
            late = day >= 20_593
            prices = (2000, 20_000, 500, 1000) if late else (1000, 10_000, 0, 0)
            kinds = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
            by_hand += sum(one["usage"].get(k, 0) * p for k, p in zip(kinds, prices, strict=True))
    # by_hand is in 10^-9 units: six decimals, half to even, as the page writes them.
    assert models["composer-2"]["cost"] == f"{round(by_hand, -3) // 1000 / 10**6:.6f}"
    # By creator and by agent add up to the window.
    creators = data["byCreator"]["rows"]
    assert {row["creator"] for row in creators} == set(CREATORS)
    assert sum(row["runs"] for row in creators) == month["total"]["runs"]
    agents = data["byAgent"]["rows"]
    assert sum(row["runs"] for row in agents) == month["total"]["runs"]
    assert all(row["name"] for row in agents)
    # Against the 30 days before.
    assert month["previous"]["from"] == "2026-03-29"
    assert month["total"]["change"]["runs"] is not None
    # The budget: May's spend so far (27 of 31 days) and where it is heading.
    budget = data["budget"]
    assert (budget["month"], budget["elapsedDays"], budget["daysInMonth"]) == ("2026-05", 27, 31)
    assert budget["budget"] == "50.000000"
    spent = float(budget["spent"])
    assert float(budget["projected"]) == pytest.approx(spent * 31 / 27, abs=1e-5)


async def test_a_new_price_table_reprices_all_history(opened: OpenStores, tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(PRICES)
    book = PriceBook.read(path)
    context = context_of(opened, book)
    params = QueryParams({"days": "30", "to": "2026-05-27"})
    before = (await pages.overview(context, params)).data
    path.write_text(PRICES.replace("input = 2\noutput = 20", "input = 4\noutput = 40"))
    assert book.reload()
    after = (await pages.overview(context, params)).data
    assert after["prices"]["version"]["digest"] != before["prices"]["version"]["digest"]
    was = {row["model"]: row for row in before["windows"]["7"]["byModel"]}["composer-2"]
    now = {row["model"]: row for row in after["windows"]["7"]["byModel"]}["composer-2"]
    # The last 7 days are all after 2026-05-20: every price doubled, so does the cost
    # (less the cache prices, which did not change).
    assert float(now["cost"]) > 1.9 * float(was["cost"])
    assert now["runs"] == was["runs"]


async def test_without_prices_there_is_no_money_and_no_budget(opened: OpenStores) -> None:
    data = (await pages.overview(context_of(opened), QueryParams({"to": "2026-05-27"}))).data
    assert data["priced"] is False
    assert data["budget"] is None
    assert "cost" not in data["windows"]["7"]["total"]
    assert [chart["id"] for chart in data["charts"]] == ["runs", "tokens", "p95", "models"]
