"""A window's figures by day, model, creator and agent, beside the window before it.

A window is ``days`` UTC days ending ``today``; the one before it is as many days
just before. Day shares (per day, model and creator) give the by-day, by-model and
by-creator rows and the totals; agent shares (per span, model and agent) the by-agent
rows, over spans that each lie in one window and have one price per model (the
windows cut where a price starts or stops: :func:`spans`). Each row carries its
figures in the window and, beside them, the window before's runs and cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

from ...backend.history import UNKNOWN
from ...backend.shares import Share, Span
from ...pricing.table import PriceTable
from ...types import Document
from .figures import Figures, change

#: Agents (and creators) named one by one; the rest are one "others" row.
TOP_AGENTS = 20
TOP_CREATORS = 50
#: How a run without a model is listed.
NO_MODEL = "(none)"

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Window:
    """``days`` UTC days ending ``today`` (day numbers)."""

    today: int
    days: int

    @property
    def first(self) -> int:
        return self.today - self.days + 1

    @property
    def end(self) -> int:
        return self.today + 1

    def before(self) -> Window:
        return Window(self.first - 1, self.days)

    def holds(self, day: int) -> bool:
        return self.first <= day < self.end


def spans(window: Window, prices: PriceTable | None) -> list[Span]:
    """The window before ``window`` and ``window``, cut where a price starts or stops."""
    before = window.before()
    cuts = [before.first, window.first, window.end]
    if prices is not None:
        cuts += prices.change_days(before.first, window.end)
    points = sorted(set(cuts))
    return list(pairwise(points))


#: A share, the day it is priced on, and its cost (None: unpriced or no table).
Priced = tuple[Share, int, int | None]


def with_costs(
    shares: Iterable[Share],
    prices: PriceTable | None,
    day: Callable[[Share], int] = lambda share: share.at,
) -> list[Priced]:
    """Each share with its day and its cost, worked out once for every table it is in."""
    if prices is None:
        return [(share, day(share), None) for share in shares]
    # Thousands of shares, a few (model, day) prices: each looked up once.
    known: dict[tuple[str | None, int], tuple[int, int, int, int] | None] = {}
    found: list[Priced] = []
    for share in shares:
        at = day(share)
        key = (share.model, at)
        if key not in known:
            known[key] = prices.prices(share.model, at)
        price = known[key]
        if price is None:
            found.append((share, at, None))
            continue
        tokens = share.tokens
        cost = (
            tokens[0] * price[0]
            + tokens[1] * price[1]
            + tokens[2] * price[2]
            + tokens[3] * price[3]
        )
        found.append((share, at, cost))
    return found


def grouped(
    shares: Iterable[Priced],
    window: Window,
    prices: PriceTable | None,
    key: Callable[[Share], K],
) -> dict[K, Figures]:
    """The figures of the shares in ``window``, by ``key``."""
    found: dict[K, Figures] = defaultdict(Figures)
    first, end, is_priced = window.first, window.end, prices is not None
    for share, at, cost in shares:
        if first <= at < end:
            found[key(share)].add_priced(share, cost, is_priced)
    return found


def _rows(
    now: dict[K, Figures],
    before: dict[K, Figures],
    priced: bool,
    name: Callable[[K], Document],
    top: int | None = None,
) -> tuple[list[Document], Document | None]:
    """Rows costliest first (then most tokens, most runs), each with the period
    before's runs and cost; past ``top`` one row of the rest (None if none)."""
    order = sorted(now, key=lambda k: now[k].sort_key(), reverse=True)
    shown = order if top is None else order[:top]
    rows = [_row(now[k], before.get(k), priced, name(k)) for k in shown]
    rest = order[len(shown) :]
    if not rest:
        return rows, None
    others, others_before = Figures(), Figures()
    for k in rest:
        others.merge(now[k])
        if k in before:
            others_before.merge(before[k])
    return rows, {**_row(others, others_before, priced, {}), "count": len(rest)}


def _row(now: Figures, before: Figures | None, priced: bool, name: Document) -> Document:
    before = before or Figures()
    previous = before.to_json(priced)
    return {
        **name,
        **now.to_json(priced),
        "previous": {key: previous[key] for key in ("runs", "failed", "cost") if key in previous},
        "change": change(now, before, priced),
    }


def model_name(model: str | None) -> Document:
    return {"model": model if model is not None else NO_MODEL}


def by_model(
    day_shares: Sequence[Priced], window: Window, prices: PriceTable | None
) -> list[Document]:
    now = grouped(day_shares, window, prices, lambda s: s.model)
    before = grouped(day_shares, window.before(), prices, lambda s: s.model)
    return _rows(now, before, prices is not None, model_name)[0]


def by_creator(day_shares: Sequence[Priced], window: Window, prices: PriceTable | None) -> Document:
    now = grouped(day_shares, window, prices, lambda s: s.who or UNKNOWN)
    before = grouped(day_shares, window.before(), prices, lambda s: s.who or UNKNOWN)
    rows, others = _rows(now, before, prices is not None, lambda c: {"creator": c}, TOP_CREATORS)
    return {"rows": rows, "others": others}


def by_agent(
    agent_shares: Sequence[Share],
    cut: Sequence[Span],
    window: Window,
    prices: PriceTable | None,
) -> Document:
    """Agents costliest first; each agent share is priced on its span's first day
    (each span has one price per model).

    What :func:`_rows` of :func:`grouped` agents gives, made from the plain sums of
    :func:`_agent_cells`: a month's overview of a store of a million runs a year has
    8,000 agents, of which 20 are shown; the rest are added up as sums, and Figures
    are made for the shown rows and the "others" row only.
    """
    now, before = _agent_cells(agent_shares, cut, window, prices)
    priced = prices is not None
    # Costliest first, then most tokens, most runs (Figures.sort_key); ties keep the
    # order the agents were first met in, as a stable sort does.
    order = sorted(
        now,
        key=lambda who: _cell_key(now[who], priced),
        reverse=True,
    )
    shown, rest = order[:TOP_AGENTS], order[TOP_AGENTS:]
    rows = [
        _row(
            _cell_figures(now[who], priced),
            _cell_figures(before[who], priced) if who in before else None,
            priced,
            {"agentId": who},
        )
        for who in shown
    ]
    others = None
    if rest:
        rest_now = _cells_sum([now[who] for who in rest], priced)
        rest_before = _cells_sum([before[who] for who in rest if who in before], priced)
        others = {**_row(rest_now, rest_before, priced, {}), "count": len(rest)}
    return {"rows": rows, "others": others, "agents": len(now)}


#: An agent's sums in a window: runs, failed, 4 token sums, cost (None: none priced),
#: unpriced runs, 4 unpriced token sums, and the unpriced models.
_Cell = list[Any]


def _cell_key(cell: _Cell, priced: bool) -> tuple[int, int, int]:
    """``Figures.sort_key`` of the cell's figures."""
    cost = cell[6] if priced else None
    return (cost or 0, cell[2] + cell[3] + cell[4] + cell[5], cell[0])


def _cell_figures(cell: _Cell, priced: bool) -> Figures:
    return Figures(
        cell[0],
        cell[1],
        (cell[2], cell[3], cell[4], cell[5]),
        cell[6] if priced else None,
        cell[7],
        (cell[8], cell[9], cell[10], cell[11]),
        cell[12],
    )


def _cells_sum(cells: Iterable[_Cell], priced: bool) -> Figures:
    """The cells' figures merged (``Figures.merge`` of each, from an empty one)."""
    sums = [0] * 12
    cost: int | None = None
    models: set[str | None] = set()
    for cell in cells:
        for n in (0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11):
            sums[n] += cell[n]
        if priced and cell[6] is not None:
            cost = cell[6] if cost is None else cost + cell[6]
        models |= cell[12]
    return Figures(
        sums[0],
        sums[1],
        (sums[2], sums[3], sums[4], sums[5]),
        cost,
        sums[7],
        (sums[8], sums[9], sums[10], sums[11]),
        models,
    )


def _agent_cells(
    agent_shares: Sequence[Share], cut: Sequence[Span], window: Window, prices: PriceTable | None
) -> tuple[dict[str | None, _Cell], dict[str | None, _Cell]]:
    """Each agent's sums in ``window`` and in the window before: what
    :func:`with_costs` and :func:`grouped` give, in one pass. Each share is looked at
    once, its sums added to plain lists.
    """
    previous = window.before()
    # Per span: which window it lies in (0 now, 1 before, None neither).
    side = [0 if window.holds(first) else 1 if previous.holds(first) else None for first, _ in cut]
    known: dict[tuple[str | None, int], tuple[int, int, int, int] | None] = {}
    cells: tuple[dict[str | None, _Cell], dict[str | None, _Cell]] = ({}, {})
    for share in agent_shares:
        where = side[share.at]
        if where is None:
            continue
        found = cells[where]
        cell = found.get(share.who)
        if cell is None:
            cell = found[share.who] = [0, 0, 0, 0, 0, 0, None, 0, 0, 0, 0, 0, set()]
        tokens = share.tokens
        cell[0] += share.runs
        cell[1] += share.failed
        cell[2] += tokens[0]
        cell[3] += tokens[1]
        cell[4] += tokens[2]
        cell[5] += tokens[3]
        if prices is None:
            continue
        key = (share.model, cut[share.at][0])
        if key not in known:
            known[key] = prices.prices(share.model, key[1])
        price = known[key]
        if price is None:
            cell[7] += share.runs
            cell[8] += tokens[0]
            cell[9] += tokens[1]
            cell[10] += tokens[2]
            cell[11] += tokens[3]
            cell[12].add(share.model)
            continue
        cost = (
            tokens[0] * price[0]
            + tokens[1] * price[1]
            + tokens[2] * price[2]
            + tokens[3] * price[3]
        )
        cell[6] = cost if cell[6] is None else cell[6] + cost
    return cells


def totals(
    day_shares: Sequence[Priced], window: Window, prices: PriceTable | None
) -> tuple[Figures, Figures]:
    """The window's figures in all, and the window before's."""
    now = grouped(day_shares, window, prices, lambda s: 0).get(0, Figures())
    before = grouped(day_shares, window.before(), prices, lambda s: 0).get(0, Figures())
    return now, before


def by_day(
    day_shares: Sequence[Priced], window: Window, prices: PriceTable | None
) -> dict[int, Figures]:
    found = grouped(day_shares, window, prices, lambda s: s.at)
    return {day: found.get(day, Figures()) for day in range(window.first, window.end)}
