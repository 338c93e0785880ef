"""Runs, failures, tokens and cost, added up: what every row of the overview shows.

A row adds :class:`~bridge_store.backend.shares.Share` sums, each priced at its model's price
on its day (``PriceTable.cost``). A share whose model has no price that day adds its
runs and tokens to the row's ``unpriced`` part and nothing to its cost: a row of
unpriced runs shows their tokens and "unpriced", never a cost of zero. Without a
price table there is no cost at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...backend.history import TOKEN_KINDS
from ...backend.shares import NO_TOKENS, Share, TokenSums, add_tokens
from ...pricing.money import cost_text, percent_change
from ...pricing.table import PriceTable
from ...types import Document


def tokens_json(tokens: TokenSums) -> dict[str, int]:
    return dict(zip(TOKEN_KINDS, tokens, strict=True))


@dataclass(slots=True)
class Figures:
    runs: int = 0
    failed: int = 0
    tokens: TokenSums = NO_TOKENS
    #: The cost of the priced runs (cost units); None until one is priced.
    cost: int | None = None
    unpriced_runs: int = 0
    unpriced_tokens: TokenSums = NO_TOKENS
    #: Models of the unpriced runs.
    unpriced_models: set[str | None] = field(default_factory=set)

    def add(self, share: Share, day: int, prices: PriceTable | None) -> None:
        """Add ``share`` (runs on ``day``) at ``prices``."""
        cost = prices.sums_cost(share.model, day, share.tokens) if prices is not None else None
        self.add_priced(share, cost, prices is not None)

    def add_priced(self, share: Share, cost: int | None, priced: bool) -> None:
        """Add ``share`` whose cost is known (``priced``: there is a price table)."""
        self.runs += share.runs
        self.failed += share.failed
        self.tokens = add_tokens(self.tokens, share.tokens)
        if not priced:
            return
        if cost is None:
            self.unpriced_runs += share.runs
            self.unpriced_tokens = add_tokens(self.unpriced_tokens, share.tokens)
            self.unpriced_models.add(share.model)
        else:
            self.cost = cost if self.cost is None else self.cost + cost

    def merge(self, other: Figures) -> None:
        self.runs += other.runs
        self.failed += other.failed
        self.tokens = add_tokens(self.tokens, other.tokens)
        if other.cost is not None:
            self.cost = other.cost if self.cost is None else self.cost + other.cost
        self.unpriced_runs += other.unpriced_runs
        self.unpriced_tokens = add_tokens(self.unpriced_tokens, other.unpriced_tokens)
        self.unpriced_models |= other.unpriced_models

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens)

    def sort_key(self) -> tuple[int, int, int]:
        """Costliest first, then most tokens, then most runs."""
        return (self.cost or 0, self.total_tokens, self.runs)

    def to_json(self, priced: bool) -> Document:
        shown: Document = {
            "runs": self.runs,
            "failed": self.failed,
            "tokens": tokens_json(self.tokens),
        }
        if priced:
            # No runs cost nothing; runs none of which has a price have no cost.
            shown["cost"] = cost_text(0 if self.runs == 0 else self.cost)
            shown["unpriced"] = (
                {"runs": self.unpriced_runs, "tokens": tokens_json(self.unpriced_tokens)}
                if self.unpriced_runs
                else None
            )
        return shown


def change(now: Figures, before: Figures, priced: bool) -> Document:
    """How each figure compares with the period before: ``+12%``, or None when the
    period before had none of it."""
    shown: Document = {
        "runs": percent_change(now.runs, before.runs),
        "failed": percent_change(now.failed, before.failed),
        "tokens": percent_change(now.total_tokens, before.total_tokens),
    }
    if priced:
        shown["cost"] = percent_change(now.cost or 0, before.cost or 0)
    return shown
