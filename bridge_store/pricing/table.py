"""The price table: per model, prices per million tokens in force from a UTC day on.

A run is priced at the entry of its model in force on the UTC day it started (its
``startedAt``, else ``createdAt``: the day the overview counts it on). Entries change
prices at the start of a day, never within one, so a day's runs of one model all have
one price and the per-day sums the backends keep price exactly. A model without an
entry in force that day, or whose entry leaves its prices to be filled in (what
``prices init`` writes), is unpriced: its runs show their tokens and no cost, never a
cost of zero.

The table also holds each tenant's monthly budget, and the version of the file it was
read from, which every priced page names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise

from ..backend.statistics import DAY_MS, TOKEN_KINDS

#: Price keys of the file -> the token kind each prices (``history.TOKEN_KINDS``).
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
PRICED = dict(zip(PRICE_KEYS, TOKEN_KINDS, strict=True))

#: Prices per token kind, in :data:`~bridge_store.pricing.money.PRICE_SCALE` parts of
#: a unit per million tokens, in :data:`~bridge_store.backend.history.TOKEN_KINDS` order.
Prices = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class PriceEntry:
    """One model's prices over a range of UTC days (day numbers: epoch ms // a day)."""

    #: The first day it is in force; None: from the beginning.
    first_day: int | None
    #: The first day it is no longer in force; None: from then on.
    end_day: int | None
    #: None: listed, prices not filled in yet (the model stays unpriced).
    prices: Prices | None

    def covers(self, day: int) -> bool:
        if self.first_day is not None and day < self.first_day:
            return False
        return self.end_day is None or day < self.end_day


@dataclass(frozen=True, slots=True)
class TableVersion:
    """Which file priced a page: its content's SHA-256 (the first 12 hex digits) and
    when it was last modified (epoch ms)."""

    digest: str
    modified_ms: int

    def to_json(self) -> dict[str, str]:
        modified = datetime.fromtimestamp(self.modified_ms / 1000, UTC)
        return {"digest": self.digest, "modified": modified.strftime("%Y-%m-%d %H:%M:%S UTC")}


@dataclass(frozen=True, slots=True)
class PriceTable:
    currency: str
    #: Model id -> its entries, by first day; no two of one model cover the same day.
    models: Mapping[str, tuple[PriceEntry, ...]]
    #: Tenant -> its budget per calendar month (UTC), in cost units (money.COST_SCALE).
    budgets: Mapping[str, int] = field(default_factory=dict)
    version: TableVersion | None = None

    def prices(self, model: str | None, day: int) -> Prices | None:
        """The prices of ``model`` in force on ``day``; None: unpriced."""
        entries = self.models.get(model) if model is not None else None
        for entry in entries or ():
            if entry.covers(day):
                return entry.prices
        return None

    def cost(self, model: str | None, day: int, tokens: Mapping[str, int]) -> int | None:
        """What ``tokens`` (by kind) of ``model`` on ``day`` cost, exactly (cost
        units); None when that model is not priced that day."""
        prices = self.prices(model, day)
        if prices is None:
            return None
        return sum(
            tokens.get(kind, 0) * price for kind, price in zip(TOKEN_KINDS, prices, strict=True)
        )

    def sums_cost(self, model: str | None, day: int, sums: tuple[int, int, int, int]) -> int | None:
        """:meth:`cost` of token sums in ``TOKEN_KINDS`` order (the overview's hot path)."""
        prices = self.prices(model, day)
        if prices is None:
            return None
        return sums[0] * prices[0] + sums[1] * prices[1] + sums[2] * prices[2] + sums[3] * prices[3]

    def run_cost(
        self, model: str | None, started_at: int | None, tokens: Mapping[str, int] | None
    ) -> int | None:
        """A run's cost: its tokens at its model's prices on the day it started; None
        when unpriced or without usage."""
        if tokens is None:
            return None
        day = (started_at if started_at is not None else 0) // DAY_MS
        return self.cost(model, day, tokens)

    def change_days(self, first_day: int, end_day: int) -> list[int]:
        """The days in ``(first_day, end_day)`` on which some price starts or stops:
        where a range of days must be split for each part to have one price per model."""
        found = {
            day
            for entries in self.models.values()
            for entry in entries
            for day in (entry.first_day, entry.end_day)
            if day is not None and first_day < day < end_day
        }
        return sorted(found)

    def budget(self, tenant: str) -> int | None:
        return self.budgets.get(tenant)

    def describe(self) -> dict[str, object]:
        """What a page says of the table that priced it."""
        return {
            "currency": self.currency,
            "version": self.version.to_json() if self.version is not None else None,
        }


def sorted_entries(entries: Iterable[PriceEntry]) -> tuple[PriceEntry, ...]:
    """Entries by first day (one from the beginning first)."""
    return tuple(sorted(entries, key=lambda e: (e.first_day is not None, e.first_day or 0)))


def overlap(entries: tuple[PriceEntry, ...]) -> tuple[PriceEntry, PriceEntry] | None:
    """Two sorted entries that cover a common day, if any."""
    for before, after in pairwise(entries):
        if before.end_day is None or after.first_day is None or before.end_day > after.first_day:
            return before, after
    return None


def day_of(text_day: int) -> str:
    """A day number as the file writes it (YYYY-MM-DD)."""
    at = datetime.fromtimestamp(text_day * DAY_MS / 1000, UTC)
    return f"{at.year:04d}-{at.month:02d}-{at.day:02d}"
