"""Spend against budget and failures per tenant on ``/metrics``, read from the store.

A SQLite store (per-day sums) holds two tenants' runs of this month and the two weeks
before; ``/metrics`` shows each tenant's spend this month at the price table's prices,
its budget, its unpriced runs, and its runs and failures in the last 7 days and the 7
before: the series the alert rules in ``deploy/prometheus`` read. An operator sees
every tenant, a tenant's admin its own only. The spend is the overview's own figure;
a new price table changes it at the next read. A memory store keeps no sums: none of
these series.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.backend.statistics import DAY_MS
from bridge_store.conformance.harness import run
from bridge_store.ops import spend
from bridge_store.pricing.book import PriceBook
from bridge_store.server.app import METRICS_PATH, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .test_activity_metrics import ADMIN, ADMIN_A, tokens
from .test_viewer_tenants import WRITE_A, WRITE_B, store

PRICES = """
currency = "EUR"
[models."composer-2"]
input = 2
output = 10
[budgets]
team-a = 100
team-c = 5
"""


def runs_of(prefix: str, days_ago: list[int], status: str, model: str) -> list[Any]:
    today = time.time_ns() // 1_000_000 // DAY_MS
    calls = []
    for n, ago in enumerate(days_ago):
        start = (today - ago) * DAY_MS + 1000
        doc = run(
            f"{prefix}-{n}",
            "agent-1",
            turn_number=n + 1,
            status=status,
            model={"id": model},
            startedAt=start,
            usage={"inputTokens": 1_000_000, "outputTokens": 100_000},
        )
        calls.append(("runs", "create", {"run": doc}))
    return calls


@pytest.fixture
def prices(tmp_path: Path) -> PriceBook:
    path = tmp_path / "prices.toml"
    path.write_text(PRICES)
    return PriceBook.read(path)


@pytest.fixture(params=["sqlite", "memory"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(kind: str, tmp_path: Path, prices: PriceBook) -> Iterator[str]:
    url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    config = ServerConfig(routes=Routes.single(url), tokens=tokens(), prices=prices)
    with running(create_app(config)) as base:
        yield base


def series(base: str, token: str = ADMIN) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(base + METRICS_PATH, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.startswith("bridge_store_tenant_"):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def at(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def test_spend_budget_and_failures_per_tenant(
    server: str, kind: str, prices: PriceBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spend, "REFRESH_SECONDS", 0.0)  # every scrape reads the store
    today = time.gmtime()
    # Team A: runs of today (this month's whole), failures this week, fewer before.
    store(server, WRITE_A, runs_of("a-ok", [0, 0, 1, 8, 9, 10, 11], "finished", "composer-2"))
    store(server, WRITE_A, runs_of("a-bad", [0, 2, 3, 4], "error", "composer-2"))
    store(server, WRITE_A, runs_of("a-x", [0], "finished", "gpt-5"))
    store(server, WRITE_B, runs_of("b", [0, 1], "finished", "composer-2"))
    found = series(server)
    if kind == "memory":
        # A memory store keeps no per-day sums: no series rather than a scan per scrape.
        assert found == {}
        return
    # Team A's composer-2 runs of this UTC month (the days ago before its first day are not).
    priced = [ago for ago in (0, 0, 1, 8, 9, 10, 11, 0, 2, 3, 4) if ago < today.tm_mday]
    # Each: 1M input at 2 + 0.1M output at 10 = 3 EUR.
    spent = at(found, "bridge_store_tenant_spend", tenant="team-a", currency="EUR")
    assert spent == 3 * len(priced)
    assert at(found, "bridge_store_tenant_budget", tenant="team-a", currency="EUR") == 100
    # A tenant with a budget and no runs: its budget, and nothing spent.
    assert at(found, "bridge_store_tenant_budget", tenant="team-c", currency="EUR") == 5
    assert at(found, "bridge_store_tenant_spend", tenant="team-c", currency="EUR") == 0
    assert at(found, "bridge_store_tenant_unpriced_runs", tenant="team-a") == 1
    assert at(found, "bridge_store_tenant_runs", tenant="team-a", window="last_7d") == 8
    assert at(found, "bridge_store_tenant_failed_runs", tenant="team-a", window="last_7d") == 4
    assert at(found, "bridge_store_tenant_runs", tenant="team-a", window="previous_7d") == 4
    assert at(found, "bridge_store_tenant_failed_runs", tenant="team-a", window="previous_7d") == 0
    assert at(found, "bridge_store_tenant_spend", tenant="team-b", currency="EUR") == 6
    assert at(found, "bridge_store_tenant_budget", tenant="team-b", currency="EUR") is None
    # A tenant's admin sees its own tenant alone.
    own = series(server, ADMIN_A)
    assert own
    assert {dict(labels)["tenant"] for _, labels in own} == {"team-a"}
    # A new price table: the next read prices with it.
    assert prices.path is not None
    prices.path.write_text(PRICES.replace("input = 2", "input = 4"))
    assert prices.reload()
    again = series(server)
    assert at(again, "bridge_store_tenant_spend", tenant="team-b", currency="EUR") == 10


def test_the_store_is_read_once_in_a_while_not_for_every_scrape(
    server: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "memory":
        pytest.skip("a memory store has no sums to read")
    first = series(server)
    store(server, WRITE_B, runs_of("late", [0], "finished", "composer-2"))
    # Within REFRESH_SECONDS the last read answers: the run above is not there yet.
    assert series(server) == first
    monkeypatch.setattr(spend, "REFRESH_SECONDS", 0.0)
    assert at(series(server), "bridge_store_tenant_runs", tenant="team-b", window="last_7d") == 1
