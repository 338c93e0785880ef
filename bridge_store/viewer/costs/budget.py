"""The month's spend against the tenant's budget, and where it is heading.

The month is the UTC calendar month of the overview's last day. Spent is the cost of
the month's runs up to that day (priced runs only; unpriced ones are counted apart);
projected is that spend carried on at the same daily rate to the month's end
(spent / days so far * days in the month), in exact integers.
"""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ...backend.shares import Share
from ...backend.statistics import DAY_MS
from ...pricing.money import cost_text
from ...pricing.table import PriceTable
from ...types import Document
from .figures import Figures


@dataclass(frozen=True, slots=True)
class Month:
    first_day: int
    days: int
    name: str

    @classmethod
    def of(cls, day: int) -> Month:
        at = datetime.fromtimestamp(day * DAY_MS / 1000, UTC)
        first = day - (at.day - 1)
        days = calendar.monthrange(at.year, at.month)[1]
        return cls(first, days, f"{at.year:04d}-{at.month:02d}")


def percent(part: int, whole: int) -> int | None:
    """``part`` as a whole percent of ``whole`` (rounded down); None for no whole."""
    return None if whole <= 0 else part * 100 // whole


def month_spend(
    day_shares: Sequence[Share], today: int, prices: PriceTable
) -> tuple[Month, Figures]:
    month = Month.of(today)
    spent = Figures()
    for share in day_shares:
        if month.first_day <= share.at <= today:
            spent.add(share, share.at, prices)
    return month, spent


def projected(spent: int, elapsed: int, days: int) -> int:
    return spent * days // elapsed if elapsed > 0 else spent


def budget_view(
    day_shares: Sequence[Share], today: int, prices: PriceTable, tenant: str
) -> Document | None:
    """The budget section; None when the price table gives ``tenant`` no budget."""
    budget = prices.budget(tenant)
    if budget is None:
        return None
    month, spent = month_spend(day_shares, today, prices)
    elapsed = today - month.first_day + 1
    cost = spent.cost or 0
    heading = projected(cost, elapsed, month.days)
    return {
        "month": month.name,
        "budget": cost_text(budget),
        "spent": cost_text(cost),
        "projected": cost_text(heading),
        "percentSpent": percent(cost, budget),
        "percentProjected": percent(heading, budget),
        "elapsedDays": elapsed,
        "daysInMonth": month.days,
        "over": cost > budget,
        "projectedOver": heading > budget,
        "unpricedRuns": spent.unpriced_runs,
    }
