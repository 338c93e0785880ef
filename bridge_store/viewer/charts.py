"""The overview's charts: their data (in the page's JSON) and their drawing, as inline SVG.

Drawn on the server: no JavaScript, no library, nothing from another origin (the
viewer's Content-Security-Policy stays as it is). Each chart is a ``<figure>`` whose
``<svg role="img">`` has a title and a one-sentence text alternative, and whose
numbers are a table beside it; each bar carries its value (``data-value``), which the
browser tests compare with the JSON twin. Colours are CSS variables of the viewer's
stylesheet, so the charts follow its dark mode; the SVG scales with its ``viewBox``
to the width of a phone.

:func:`overview_charts` makes the data (labels and series of numbers, costs as the
decimal text the JSON carries); :func:`layout` turns one chart into bars with their
places, for the template (``templates/_chart.html``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..pricing.table import PriceTable
from ..types import Document

#: The drawing's own units: the SVG scales to its box.
WIDTH, HEIGHT = 400, 150
#: Room at the bottom (day labels) and at the top (the largest value).
BOTTOM, TOP = 18, 16


def _number(value: Any) -> float:
    """A drawn height: a JSON number or decimal text; nothing, negative or unreadable is 0."""
    if value is None or isinstance(value, bool):
        return 0.0
    try:
        number = float(Decimal(str(value)))
    except (InvalidOperation, ValueError, OverflowError):
        return 0.0
    return number if 0 < number < float("inf") else 0.0


def _sum(values: list[Any]) -> int:
    return sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))


def _peak(labels: list[str], values: list[Any]) -> str:
    drawn = [_number(v) for v in values]
    if not drawn or max(drawn) <= 0:
        return "none"
    at = drawn.index(max(drawn))
    return f"{values[at]} on {labels[at]}"


def overview_charts(data: Document, prices: PriceTable | None) -> list[Document]:
    """The charts of the selected window: runs and failures, tokens, cost and p95 per
    day, and each model's share."""
    view = data["windows"][str(data["days"])]
    days = list(reversed(view["byDay"]))  # oldest first, left to right
    labels = [row["day"] for row in days]
    span = f"{view['from']} to {view['to']}"
    runs = [row["runs"] for row in days]
    failed = [row["failed"] for row in days]
    tokens = [sum(row["tokens"].values()) for row in days]
    charts: list[Document] = [
        {
            "id": "runs",
            "title": "Runs and failures per day",
            "labels": labels,
            "series": [{"name": "Runs", "values": runs}, {"name": "Failed", "values": failed}],
            "summary": f"Runs per day, {span}: {_sum(runs):,} in all, {_sum(failed):,} failed; "
            f"most runs: {_peak(labels, runs)}.",
        },
        {
            "id": "tokens",
            "title": "Tokens per day",
            "labels": labels,
            "series": [{"name": "Tokens", "values": tokens}],
            "summary": f"Tokens per day, {span}: {_sum(tokens):,} in all; "
            f"most: {_peak(labels, tokens)}.",
        },
    ]
    if prices is not None:
        cost = [row.get("cost") for row in days]
        currency = prices.currency
        charts.append(
            {
                "id": "cost",
                "title": f"Cost per day ({currency})",
                "labels": labels,
                "series": [{"name": f"Cost ({currency})", "values": cost}],
                "summary": f"Cost per day in {currency}, {span}: {view['total'].get('cost')} in "
                f"all (priced runs); most: {_peak(labels, cost)}.",
            }
        )
    p95 = [row["p95Ms"] for row in days]
    charts.append(
        {
            "id": "p95",
            "title": "95th percentile duration per day (ms)",
            "labels": labels,
            "series": [{"name": "p95 (ms)", "values": p95}],
            "summary": f"95th percentile run duration per day in milliseconds, {span}; "
            f"longest: {_peak(labels, p95)}.",
        }
    )
    charts.append(_model_share(view, prices))
    return charts


def _model_share(view: Document, prices: PriceTable | None) -> Document:
    """Each model's share of the window's cost (of its tokens without prices)."""
    rows = view["byModel"]
    by_cost = prices is not None and any(row.get("cost") not in (None, "0.000000") for row in rows)
    what = "cost" if by_cost else "tokens"
    values: list[Any] = [
        row.get("cost") if by_cost else sum(row["tokens"].values()) for row in rows
    ]
    drawn = [_number(v) for v in values]
    whole = sum(drawn)
    shares = [round(100 * v / whole) if whole > 0 else 0 for v in drawn]
    labels = [row["model"] for row in rows]
    parts = ", ".join(f"{m} {s}%" for m, s in zip(labels, shares, strict=True)) or "no runs"
    return {
        "id": "models",
        "title": f"Each model's share of the {what}",
        "labels": labels,
        "series": [{"name": f"Share of the {what} (%)", "values": shares}],
        "of": values,
        "summary": f"Share of the {what} by model, {view['from']} to {view['to']}: {parts}.",
        "horizontal": True,
    }


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: int
    value: Any
    label: str


def layout(chart: Document) -> dict[str, Any]:
    """Bars of ``chart`` with their places in a ``WIDTH`` x ``HEIGHT`` drawing: each day
    one slot, its series' bars drawn over each other from the bottom (failed over runs)."""
    if chart.get("horizontal"):
        return _horizontal(chart)
    labels: list[str] = chart["labels"]
    series = chart["series"]
    peak = max((_number(v) for s in series for v in s["values"]), default=0.0)
    room = HEIGHT - BOTTOM - TOP
    slot = WIDTH / max(1, len(labels))
    bars = []
    for n, name in enumerate(labels):
        for k, one in enumerate(series):
            value = one["values"][n]
            height = room * _number(value) / peak if peak > 0 else 0.0
            inset = slot * (0.15 + 0.1 * k)
            bars.append(
                Bar(
                    round(n * slot + inset, 2),
                    round(HEIGHT - BOTTOM - height, 2),
                    round(max(1.0, slot - 2 * inset), 2),
                    round(height, 2),
                    k,
                    value,
                    name,
                )
            )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "bars": bars,
        "base": HEIGHT - BOTTOM,
        "peak": next(
            (v for s in series for v in s["values"] if peak > 0 and _number(v) == peak), None
        ),
        "first": labels[0] if labels else "",
        "last": labels[-1] if labels else "",
    }


def _horizontal(chart: Document) -> dict[str, Any]:
    """One bar per label, its length its percent of the whole width."""
    labels: list[str] = chart["labels"]
    values = chart["series"][0]["values"]
    row = 22
    bars = [
        Bar(0, n * row + 4, round(WIDTH * _number(v) / 100, 2), row - 8, 0, v, labels[n])
        for n, v in enumerate(values)
    ]
    return {"width": WIDTH, "height": max(row, row * len(labels)), "bars": bars, "row": row}
