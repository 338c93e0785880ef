"""The overview's data: both windows' days and models, who spent what, the budget.

Read once per page: the day shares from the earliest day any part shows (the window
before the 30 days, or the month's first day) to the last day, the agent shares of
the selected window and the one before it, and the counts of the 30 days (durations
and tool calls), from the backend's own sums (``method`` "index") or by one bounded
read of the history (``scan``, :mod:`.scan`). A store too large to read within the
bound answers ``tooLarge`` instead of figures.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...backend.shares import Share
from ...backend.statistics import DAY_MS, Counts, Totals
from ...pricing.table import PriceTable
from ...types import Document
from ..activity import Activity
from ..overview import day_text, duration_cells, window
from ..reader import HistoryReader
from .breakdown import (
    Priced,
    Window,
    by_agent,
    by_creator,
    by_day,
    by_model,
    spans,
    totals,
    with_costs,
)
from .budget import Month, budget_view
from .figures import change
from .scan import scan

#: The windows, in days; the page details one of them.
WINDOWS = (7, 30)


@dataclass(frozen=True, slots=True)
class Read:
    """What one overview read: the figures' sources."""

    counts: Counts
    day_shares: list[Share]
    agent_shares: list[Share]
    method: str
    #: Runs read by a scan that stopped at its bound (None: nothing was cut short).
    too_large: int | None = None


def totals_of(day_shares: Sequence[Share], first: int, end: int) -> list[Totals]:
    """Per (day, model) totals of the day shares (summed over creators)."""
    cells: dict[tuple[int, str | None], list[int]] = defaultdict(lambda: [0] * 6)
    for share in day_shares:
        if first <= share.at < end:
            cell = cells[(share.at, share.model)]
            cell[0] += share.runs
            cell[1] += share.failed
            for n, value in enumerate(share.tokens, start=2):
                cell[n] += value
    return [Totals(day, model, *cell) for (day, model), cell in cells.items()]


async def read(
    reader: HistoryReader,
    activity: Activity,
    today: int,
    days: int,
    prices: PriceTable | None,
    scan_limit: int | None,
) -> Read:
    """What the overview of ``days`` ending ``today`` shows, read once."""
    tenant = activity.tenant
    longest = Window(today, max(WINDOWS))
    earliest = min(longest.before().first, Month.of(today).first_day)
    cut = spans(Window(today, days), prices)
    counted = (longest.first, longest.end)
    index, statistics = activity.shares(), activity.statistics()
    if index is not None and statistics is not None:
        # Three reads at once: on a store with a pool of connections (Postgres) the
        # database answers one while this process turns another's rows into figures.
        day_shares, agent_shares, counts = await asyncio.gather(
            index.day_shares(tenant, earliest, today + 1),
            # Only the agents the table ranks (those of the selected window).
            index.agent_shares(tenant, cut, agents_from=Window(today, days).first),
            statistics.counts(tenant, since=counted[0] * DAY_MS, until=counted[1] * DAY_MS),
        )
        return Read(counts, day_shares, agent_shares, "index")
    scanned = await scan(
        reader,
        activity,
        first_day=earliest,
        end_day=today + 1,
        counted=counted,
        cut=cut,
        limit=scan_limit,
    )
    if not scanned.complete:
        return Read(Counts(), [], [], "scan", too_large=scanned.read - 1)
    return Read(scanned.counts, scanned.day_shares, scanned.agent_shares, "scan")


def money_window(
    view: Document, shares: Sequence[Priced], size: int, today: int, prices: PriceTable | None
) -> Document:
    """``view`` (a window of counts) with its money, the window before and the changes."""
    priced = prices is not None
    span = Window(today, size)
    now, before = totals(shares, span, prices)
    days = by_day(shares, span, prices)
    models = {row["model"]: row for row in by_model(shares, span, prices)}
    previous = span.before()
    return {
        **view,
        "total": {**view["total"], **now.to_json(priced), "change": change(now, before, priced)},
        "previous": {
            "from": day_text(previous.first),
            "to": day_text(previous.today),
            **before.to_json(priced),
        },
        "byDay": [
            {**row, **days[today - n].to_json(priced)} for n, row in enumerate(view["byDay"])
        ],
        "byModel": [
            {**row, **{k: v for k, v in models.get(row["model"], {}).items() if k != "model"}}
            for row in view["byModel"]
        ],
        "unpriced": sorted(
            model if model is not None else "(none)" for model in now.unpriced_models
        ),
    }


def overview_data(
    got: Read, today: int, days: int, prices: PriceTable | None, tenant: str
) -> Document:
    """The page's data from what was read."""
    longest = Window(today, max(WINDOWS))
    counts = got.counts
    if got.method == "index":
        counts = Counts(
            totals_of(got.day_shares, longest.first, longest.end), counts.durations, counts.tools
        )
    shares = with_costs(got.day_shares, prices)
    cells = duration_cells(counts.durations)
    windows = {
        str(size): money_window(
            window(counts, today=today, days=size, cells=cells), shares, size, today, prices
        )
        for size in WINDOWS
    }
    selected = Window(today, days)
    return {
        "windows": windows,
        "byAgent": by_agent(got.agent_shares, spans(selected, prices), selected, prices),
        "byCreator": by_creator(shares, selected, prices),
        "budget": budget_view(got.day_shares, today, prices, tenant) if prices else None,
    }
