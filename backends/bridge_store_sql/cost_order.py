"""The run list's ``cost`` order in SQL: each run priced at the table of the moment.

Cost is never stored (a new price table re-prices all history), so the order is an
expression over the summary columns of revision 0005: for the run's model and the
price entry in force on its day, the sum of its token counts times their prices, in
millionths of a unit (``history.cost_key``'s scale), as a float, clamped within a
cursor's integers and then an integer. A run of a model or day without a price, or
without usage, sorts last (``MISSING``), as the scan sorts it. The float rounds a
cost of many digits, so two runs whose costs differ in the last of them may come in
either order; each row carries the value it was sorted by and the next page's cursor
is made of it, so pages neither repeat nor skip a run.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bridge_store.backend.history import COST_KEY_SCALE, MISSING
from bridge_store.backend.statistics import DAY_MS
from bridge_store.pricing.table import PriceTable
from bridge_store.wire.fields import MAX_SAFE_INTEGER

from .tables import runs as t

_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def cost_value(prices: PriceTable) -> sa.ColumnElement[int]:
    whens: list[tuple[sa.ColumnElement[bool], sa.ColumnElement[Any]]] = []
    for model, entries in prices.models.items():
        for entry in entries:
            if entry.prices is None:
                continue
            conditions = [t.c.model_id == model]
            if entry.first_day is not None:
                conditions.append(t.c.started_at >= entry.first_day * DAY_MS)
            if entry.end_day is not None:
                conditions.append(t.c.started_at < entry.end_day * DAY_MS)
            terms = [
                sa.cast(sa.func.coalesce(t.c[column], 0), sa.Float)
                * sa.literal(price / COST_KEY_SCALE, sa.Float)
                for column, price in zip(_TOKENS, entry.prices, strict=True)
                if price
            ]
            cost = sum(terms[1:], terms[0]) if terms else sa.literal(0.0, sa.Float)
            whens.append((sa.and_(*conditions), cost))
    if not whens:
        return sa.literal(MISSING, sa.BigInteger)
    priced = sa.case(*whens, else_=None)
    bound = float(MAX_SAFE_INTEGER)
    clamped = sa.case((priced > bound, bound), (priced < -bound, -bound), else_=priced)
    return sa.case(
        (t.c.total_tokens.is_(None), MISSING),
        (priced.is_(None), MISSING),
        else_=sa.cast(clamped, sa.BigInteger),
    )
