"""The history's run list across agents: the SQL index and the scan give the same pages.

A store of runs of several agents, workspaces, models, statuses, durations, token
counts and creators (and odd documents: floats, bools, missing fields) is listed for
every order and filter, a few runs a page, once through the SQL backend's
``RunHistory`` (revision 0005's summary columns) and once by the scan every other
backend uses; both must give exactly the same runs in the same order, page by page.
Revision 0005's backfill gives rows from before it the very summary the backend
writes for new ones.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bridge_store.backend.history import UNKNOWN, RunFilters, Sort, run_history, summarize_run
from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.shares import run_shares
from bridge_store.conformance.harness import StoreClient, agent, run
from bridge_store.errors import Code, ConnectError
from bridge_store.pricing.loader import parse_prices
from bridge_store.pricing.table import PriceTable
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer import runs_list
from bridge_store.viewer.activity import Activity
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.runs_list import runs_page
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade
from bridge_store_sql.summary import SUMMARY_COLUMNS

TENANT = "team-a"
CREATORS = ["alice", "bob", "ci.nightly"]
DAY = 86_400_000
T0 = 1_780_000_000_000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    found: str = request.getfixturevalue("make_postgres_url")()
    return found


def principal(name: str, tenant: str = TENANT) -> Principal:
    return Principal(name=name, tenant=tenant, scope=Scope.WRITE)


def odd_usage(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            {"inputTokens": rng.randrange(10_000), "outputTokens": rng.randrange(5_000)},
            {"inputTokens": 12.7, "cacheReadTokens": True, "totalTokens": 99},
            {"outputTokens": "many"},
            {"inputTokens": 1e300},
            {},
        ]
    )


def history(rng: random.Random) -> list[tuple[Principal | None, str, str, dict[str, Any]]]:
    """Calls writing 6 agents in 3 workspaces with 60 runs, some without a creator."""
    calls: list[tuple[Principal | None, str, str, dict[str, Any]]] = []
    for n in range(6):
        doc = agent(f"agent-{n}", cwd=f"/work/{n % 3}", updated_at=T0 + n)
        calls.append((principal(CREATORS[n % 3]), "agents", "create", {"agent": doc}))
    for n in range(60):
        started = T0 + rng.randrange(-20, 5) * DAY + rng.randrange(DAY)
        fields: dict[str, Any] = {
            "status": rng.choice(["finished", "error", "running", "cancelled", None]),
            "model": rng.choice([{"id": "composer-2"}, {"id": "gpt-5"}, None, {"id": 7}]),
            "createdAt": started - 500,
            "startedAt": rng.choice([started, None]),
            "endedAt": rng.choice([started + rng.randrange(1, 600_000), None]),
            "usage": odd_usage(rng),
        }
        doc = run(f"run-{n:02}", f"agent-{n % 6}", turn_number=n // 6 + 1, **fields)
        creator = None if n % 7 == 0 else principal(rng.choice(CREATORS))
        calls.append((creator, "runs", "create", {"run": doc}))
    # A tie on every sort value: ordered by agent, then run id, descending.
    for agent_id in ("agent-0", "agent-1"):
        doc = run("run-tie", agent_id, turn_number=9, startedAt=T0, endedAt=T0 + 5)
        calls.append((principal("alice"), "runs", "create", {"run": doc}))
    return calls


@pytest.fixture
async def opened(url: str) -> AsyncIterator[OpenStores]:
    manager = get_plugin_manager()
    stores = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        client = StoreClient(stores=stores.stores, manager=manager)
        for who, substore, method, data in history(random.Random(25)):
            if who is None:  # as a copy writes: no caller, so no creator
                await stores.stores.runs.create(TENANT, data["run"])
            else:
                await dataclasses.replace(client, principal=who).call(substore, method, data)
        # Another tenant's runs, with the same ids, never show.
        other = dataclasses.replace(client, principal=principal("mallory", "team-b"))
        await other.call("runs", "create", {"run": run("run-00", "agent-0", startedAt=T0)})
        yield stores
    finally:
        await stores.close()


async def every_page(
    opened: OpenStores, filters: RunFilters, sort: Sort, *, scan: bool, limit: int = 7
) -> list[list[tuple[str, str, str | None]]]:
    stores = opened.stores
    reader = HistoryReader(in_process(lambda: stores, principal("reader")))
    index = None if scan else run_history(stores.agents, stores.runs)
    assert scan or index is not None
    activity = Activity(lambda: stores, TENANT, lambda: index)
    pages = []
    cursor = None
    prices = cost_table() if sort == "cost" else None
    while True:
        page = await runs_page(
            reader, activity, filters, sort, cursor=cursor, limit=limit, prices=prices
        )
        assert page.method == ("scan" if scan else "index")
        pages.append([(r.run["agentId"], r.run["runId"], r.creator) for r in page.rows])
        if page.next is None:
            return pages
        cursor = page.next


FILTERS = [
    RunFilters(),
    RunFilters(status="error"),
    RunFilters(model="composer-2"),
    RunFilters(cwd="/work/1"),
    RunFilters(since=T0 - 10 * DAY, until=T0),
    RunFilters(creator="bob"),
    RunFilters(creator=UNKNOWN),
    RunFilters(status="finished", cwd="/work/0", creator="alice"),
    RunFilters(model="nobody"),
]


def cost_table() -> PriceTable:
    """composer-2 priced, at another price from T0's day on; gpt-5 listed, unpriced."""
    day = T0 // DAY
    return parse_prices(
        {
            "models": {
                "composer-2": [
                    {"until": date(1970, 1, 1) + timedelta(days=day), "input": 1, "output": 3},
                    {
                        "from": date(1970, 1, 1) + timedelta(days=day),
                        "input": 2,
                        "output": 5,
                        "cache_read": Decimal("0.25"),
                    },
                ],
                "gpt-5": {},
            }
        },
        "test",
    )


@pytest.mark.parametrize("sort", ["newest", "duration", "tokens", "cost"])
async def test_the_index_and_the_scan_list_the_same_pages(opened: OpenStores, sort: Sort) -> None:
    for filters in FILTERS:
        indexed = await every_page(opened, filters, sort, scan=False)
        scanned = await every_page(opened, filters, sort, scan=True)
        assert indexed == scanned, filters
    everything = [
        row for page in await every_page(opened, RunFilters(), sort, scan=False) for row in page
    ]
    assert len(everything) == 62
    assert len(set(everything)) == 62
    assert ("agent-1", "run-tie", "alice") in everything


async def test_newest_first_by_start_then_creation(opened: OpenStores) -> None:
    stores = opened.stores
    reader = HistoryReader(in_process(lambda: stores, principal("reader")))
    runs = [doc async for batch in reader.every_run() for doc in batch]
    assert len(runs) == 62
    expected = sorted(
        runs,
        key=lambda doc: (summarize_run(doc).started_at or 0, doc["agentId"], doc["runId"]),
        reverse=True,
    )
    pages = await every_page(opened, RunFilters(), "newest", scan=False)
    listed = [(agent_id, run_id) for page in pages for agent_id, run_id, _ in page]
    assert listed == [(doc["agentId"], doc["runId"]) for doc in expected]


async def test_a_cursor_of_another_order_or_a_forged_one_is_refused(opened: OpenStores) -> None:
    stores = opened.stores
    reader = HistoryReader(in_process(lambda: stores, principal("reader")))
    activity = Activity(lambda: stores, TENANT, lambda: run_history(stores.agents, stores.runs))
    first = await runs_page(reader, activity, RunFilters(), "newest", cursor=None, limit=3)
    assert first.next is not None
    for sort, cursor in (
        ("tokens", first.next),
        ("newest", "bm90IGEgY3Vyc29y"),
        ("newest", "x" * 2000),
    ):
        with pytest.raises(ConnectError) as raised:
            await runs_page(reader, activity, RunFilters(), sort, cursor=cursor, limit=3)  # type: ignore[arg-type]
        assert raised.value.code == Code.INVALID_ARGUMENT


async def summary_rows(backend: SqlBackend) -> list[tuple[Any, ...]]:
    columns = ", ".join(SUMMARY_COLUMNS)
    query = sa.text(f"SELECT tenant, agent_id, run_id, {columns} FROM runs ORDER BY 1, 2, 3")  # noqa: S608

    def read(conn: sa.Connection) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in conn.execute(query)]

    return await backend.db.inspect(read, what="test")


async def test_the_backfill_gives_old_rows_the_summary_new_ones_get(
    url: str, opened: OpenStores
) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:
        written = await summary_rows(backend)
        assert any(row[3] != 0 for row in written)
        # Down past 0005 (the columns go) and up again (the backfill fills them).
        await backend.db.migrate(lambda conn: downgrade(conn, "0004"), what="test")
        await backend.upgrade_schema()
        assert await summary_rows(backend) == written
    finally:
        await backend.close()


def test_summaries_take_what_a_document_holds_and_ignore_the_rest() -> None:
    odd = summarize_run(
        {
            "createdAt": 10,
            "endedAt": 25,
            "status": 3,
            "model": {"id": ["x"]},
            "usage": {"inputTokens": 12.9, "outputTokens": True, "cacheReadTokens": 2**60},
        }
    )
    assert (odd.started_at, odd.duration_ms, odd.status, odd.model_id) == (10, 15, None, None)
    assert (odd.tokens, odd.total_tokens) == ({"inputTokens": 12}, 12)
    reported = summarize_run({"startedAt": 5, "usage": {"inputTokens": 3, "totalTokens": 40}})
    assert (reported.started_at, reported.duration_ms, reported.total_tokens) == (5, None, 40)
    assert summarize_run({}).tokens is None


def day_counts(runs: list[dict[str, Any]]) -> dict[int, int]:
    found: dict[int, int] = {}
    for doc in runs:
        day = (summarize_run(doc).started_at or 0) // DAY
        found[day] = found.get(day, 0) + 1
    return found


async def test_the_cost_order_of_more_runs_than_its_limit_ranks_the_latest_days(
    opened: OpenStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = opened.stores
    reader = HistoryReader(in_process(lambda: stores, principal("reader")))
    runs = [doc async for batch in reader.every_run() for doc in batch]
    index = run_history(stores.agents, stores.runs)
    activity = Activity(
        lambda: stores, TENANT, lambda: index, shares=lambda: run_shares(stores.agents, stores.runs)
    )
    prices = cost_table()
    monkeypatch.setattr(runs_list, "COST_SORT_LIMIT", 62)
    whole = await runs_page(
        reader, activity, RunFilters(), "cost", cursor=None, limit=5, prices=prices
    )
    assert whole.narrowed_since is None
    monkeypatch.setattr(runs_list, "COST_SORT_LIMIT", 10)
    page = await runs_page(
        reader, activity, RunFilters(), "cost", cursor=None, limit=5, prices=prices
    )
    since = page.narrowed_since
    assert since is not None
    assert since % DAY == 0
    counts = day_counts(runs)
    kept = sum(n for day, n in counts.items() if day >= since // DAY)
    before = max(day for day in counts if day < since // DAY)
    # The most recent days holding at most 10 runs: one day more would hold more.
    assert kept <= 10 < kept + counts[before]
    # The same pages as the order asked with that range, which the next page keeps.
    pages = []
    cursor = None
    while True:
        got = await runs_page(
            reader, activity, RunFilters(), "cost", cursor=cursor, limit=3, prices=prices
        )
        assert got.narrowed_since == since
        pages.append([(r.run["agentId"], r.run["runId"], r.creator) for r in got.rows])
        if got.next is None:
            break
        cursor = got.next
    assert pages == await every_page(opened, RunFilters(since=since), "cost", scan=True, limit=3)
    assert sum(map(len, pages)) == kept
    # A model filter counts that model's runs only.
    of_model = [doc for doc in runs if summarize_run(doc).model_id == "composer-2"]
    narrowed = await runs_page(
        reader,
        activity,
        RunFilters(model="composer-2"),
        "cost",
        cursor=None,
        limit=5,
        prices=prices,
    )
    model_counts = day_counts(of_model)
    assert narrowed.narrowed_since is not None
    kept = sum(n for day, n in model_counts.items() if day >= narrowed.narrowed_since // DAY)
    assert kept <= 10 < len(of_model)


async def test_the_scan_stops_at_its_limit_and_says_so(opened: OpenStores) -> None:
    stores = opened.stores
    reader = HistoryReader(in_process(lambda: stores, principal("reader")))
    activity = Activity(lambda: stores, TENANT)
    for sort in ("newest", "tokens"):
        refused = await runs_page(
            reader, activity, RunFilters(), sort, cursor=None, limit=5, scan_limit=61
        )
        assert (refused.rows, refused.next, refused.too_large) == ([], None, 61)
        assert refused.method == "scan"
        read = await runs_page(
            reader, activity, RunFilters(), sort, cursor=None, limit=5, scan_limit=62
        )
        assert read.too_large is None
        assert len(read.rows) == 5
