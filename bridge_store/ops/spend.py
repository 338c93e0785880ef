"""Spend and failures per tenant for ``/metrics``, from the store's per-day sums.

What Prometheus alerts on must not depend on which process it scraped or on when the
server last restarted, so these figures are read from the store, not counted in
memory: at scrape time, from the per-day sums the SQL backend keeps (``RunShares``:
one range of days of ``run_days``, every tenant, a few rows per tenant, model and
creator a day), at most once per :data:`REFRESH_SECONDS` per process (scrapes in
between are answered from the last read), each read bounded by the backend timeout.
A read that fails or times out keeps the last figures and the scrape still answers.
Stores without those sums (memory, Redis, S3) would have to read every run of every
tenant for each scrape, so they expose none of these series; docs/observability.md
says so.

Per tenant (the first :data:`MAX_TENANTS` by name; the rest summed as ``_other``,
which no tenant can be named):

- ``bridge_store_tenant_spend``: the cost of this UTC calendar month's priced runs,
  at the prices of the moment; ``bridge_store_tenant_budget``: its monthly budget
  (both with a ``currency`` label, only with a price table);
- ``bridge_store_tenant_unpriced_runs``: this month's runs without a price;
- ``bridge_store_tenant_runs`` and ``bridge_store_tenant_failed_runs`` with
  ``window`` ``last_7d`` (today and the 6 days before) and ``previous_7d`` (the 7
  before those): what the failure-rate alert compares.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from ..backend.shares import RunShares
from ..backend.statistics import DAY_MS
from ..errors import ConnectError
from ..pricing.book import PriceBook
from ..pricing.money import COST_SCALE
from ..viewer.costs.budget import Month
from ..viewer.costs.figures import Figures

logger = logging.getLogger("bridge_store.metrics")

REFRESH_SECONDS = 30.0
MAX_TENANTS = 100
OTHER_TENANTS = "_other"
WINDOWS = ("last_7d", "previous_7d")


@dataclass(slots=True)
class TenantFigures:
    month: Figures = field(default_factory=Figures)
    weeks: dict[str, Figures] = field(default_factory=lambda: {w: Figures() for w in WINDOWS})


class SpendFigures:
    """The figures of the last read, and the reads themselves."""

    def __init__(
        self,
        shares: Callable[[], RunShares | None],
        prices: PriceBook | None,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self._shares = shares
        self._prices = prices
        self._timeout = timeout
        self._clock = clock
        self._now_ms = now_ms
        self._read_at: float | None = None
        self._lock = asyncio.Lock()
        self.tenants: dict[str, TenantFigures] | None = None

    async def refresh(self) -> None:
        """Read the figures again if the last read is older than :data:`REFRESH_SECONDS`."""
        if self._fresh():
            return
        async with self._lock:  # one read at a time; the scrapes queued behind it use it
            if self._fresh():
                return
            self._read_at = self._clock()
            try:
                index = self._shares()
            except ConnectError:
                return  # the store is not open yet
            if index is None:
                self.tenants = None
                return
            today = self._now_ms() // DAY_MS
            month = Month.of(today)
            first = min(month.first_day, today - 13)
            try:
                rows = await asyncio.wait_for(index.tenant_shares(first, today + 1), self._timeout)
            except (ConnectError, TimeoutError) as error:
                logger.warning(
                    "tenant spend not read for /metrics, the last figures stay: %s", error
                )
                return
            table = self._prices.table if self._prices is not None else None
            found: dict[str, TenantFigures] = {}
            names = sorted({tenant for tenant, _ in rows})
            shown = set(names[:MAX_TENANTS])
            for tenant, share in rows:
                figures = found.setdefault(
                    tenant if tenant in shown else OTHER_TENANTS, TenantFigures()
                )
                if share.at >= month.first_day:
                    figures.month.add(share, share.at, table)
                if share.at > today - 7:
                    figures.weeks["last_7d"].add(share, share.at, None)
                elif share.at > today - 14:
                    figures.weeks["previous_7d"].add(share, share.at, None)
            self.tenants = found

    def _fresh(self) -> bool:
        return self._read_at is not None and self._clock() - self._read_at < REFRESH_SECONDS

    def collect(self) -> Iterable[Metric]:
        return self._families(None)

    def collect_tenant(self, tenant: str) -> Iterable[Metric]:
        return self._families(tenant)

    def _families(self, only: str | None) -> list[Metric]:
        if self.tenants is None:
            return []
        table = self._prices.table if self._prices is not None else None
        runs = GaugeMetricFamily(
            "bridge_store_tenant_runs",
            "Runs started in the window (last_7d: today and the 6 days before; "
            "previous_7d: the 7 before), from the store",
            labels=["tenant", "window"],
        )
        failed = GaugeMetricFamily(
            "bridge_store_tenant_failed_runs",
            "Runs started in the window that failed (status error), from the store",
            labels=["tenant", "window"],
        )
        families: list[Metric] = [runs, failed]
        spend = budget = unpriced = None
        if table is not None:
            spend = GaugeMetricFamily(
                "bridge_store_tenant_spend",
                "Cost of this UTC calendar month's priced runs at the prices of the moment",
                labels=["tenant", "currency"],
            )
            budget = GaugeMetricFamily(
                "bridge_store_tenant_budget",
                "The tenant's budget for this calendar month (the price table's budgets)",
                labels=["tenant", "currency"],
            )
            unpriced = GaugeMetricFamily(
                "bridge_store_tenant_unpriced_runs",
                "This month's runs whose model has no price on their day",
                labels=["tenant"],
            )
            families += [spend, budget, unpriced]
        tenants = dict(self.tenants)
        if table is not None:
            for tenant in table.budgets:
                tenants.setdefault(tenant, TenantFigures())
        for tenant in sorted(tenants):
            if only is not None and tenant != only:
                continue
            figures = tenants[tenant]
            for window in WINDOWS:
                runs.add_metric([tenant, window], figures.weeks[window].runs)
                failed.add_metric([tenant, window], figures.weeks[window].failed)
            if table is not None and spend and budget and unpriced:
                spend.add_metric([tenant, table.currency], _units(figures.month.cost or 0))
                unpriced.add_metric([tenant], figures.month.unpriced_runs)
                limit = table.budget(tenant)
                if limit is not None:
                    budget.add_metric([tenant, table.currency], _units(limit))
        return families


def _units(cost: int) -> float:
    """A cost as Prometheus carries it: a float of currency units, always finite."""
    bound = 10**300 * COST_SCALE  # int / int past a float's range raises OverflowError
    return cost / COST_SCALE if -bound < cost < bound else (1e300 if cost > 0 else -1e300)
