"""``bridge-store overview``: the last 7 and 30 days, per day and per model.

The viewer's Overview page as tables (runs, failed runs, tokens, median and p95
durations, the tools with the most calls and failures), or its data as JSON; with
``--prices FILE``, what the tokens cost.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .shared.price_options import add_prices_argument, prices_from
from .shared.read_options import add_read_arguments, run_paging, tenant_hint

if TYPE_CHECKING:
    from ..types import Document
    from ..viewer.prices import PriceTable
    from .shared.read_options import Pages

KINDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    overview = commands.add_parser(
        "overview",
        help="the last 7 and 30 days: runs, failures, tokens, durations, tools",
        description="The last 7 and 30 days of the history, per day and per model: runs, "
        "failed runs, tokens, the median and 95th percentile durations and the tools "
        "with the most calls and failures (the viewer's Overview page).",
    )
    overview.add_argument(
        "--days", type=int, choices=(7, 30), default=7, help="the window shown day by day"
    )
    overview.add_argument("--to", metavar="YYYY-MM-DD", help="the last UTC day (default: today)")
    overview.add_argument("--json", action="store_true", help="the page's data as one JSON object")
    add_prices_argument(overview)
    add_read_arguments(overview)


def run(args: argparse.Namespace) -> int:
    prices = prices_from(args)  # a bad price table is one line, before anything is read

    async def show(pages: Pages, args: argparse.Namespace) -> None:
        params = {"days": str(args.days), **({"to": args.to} if args.to else {})}
        data = await pages.page("overview", params)
        if not any(view["total"]["runs"] for view in data["windows"].values()):
            hint = await tenant_hint(pages.reader)
            if hint is not None:
                print(f"bridge-store: no runs in these days: {hint}", file=sys.stderr)
        if prices is not None:
            data = with_prices(data, prices)
        if args.json:
            # allow_nan=False: a cost is null, never Infinity (viewer/prices.py).
            print(json.dumps(data, ensure_ascii=False, allow_nan=False))
        else:
            print_overview(data)

    return run_paging(show, args)


def with_prices(data: Document, prices: PriceTable) -> Document:
    """The page's data priced here (over the server's own prices, if it had any)."""
    from ..viewer.overview import priced

    windows = {size: priced(view, prices) for size, view in data["windows"].items()}
    return {**data, "priced": True, "windows": windows}


def print_overview(data: Document) -> None:
    from ..viewer.templating import duration
    from ..viewer.terminal import Output

    out = Output(sys.stdout)
    priced = bool(data.get("priced"))
    money = ["cost"] if priced else []
    columns = ["runs", "failed", "input", "output", "cache read", "cache write", "median", "p95"]

    def figures(row: Document, currency: str | None) -> list[str]:
        cells = [f"{row['runs']:,}", f"{row['failed']:,}"]
        cells += [f"{row['tokens'][kind]:,}" for kind in KINDS]
        cells += [duration(row["medianMs"]), duration(row["p95Ms"])]
        if priced:
            cost = row.get("cost")
            cells.append("-" if cost is None else f"{cost:,.2f} {currency}")
        return cells

    def tools(row: Document, key: str, field: str) -> str:
        return ", ".join(f"{t['tool']} {t[field]:,}" for t in row["tools"][key]) or "-"

    windows = [
        (f"{view['from']} to {view['to']}", *figures(view["total"], view.get("currency")))
        for view in data["windows"].values()
    ]
    out.table(["days", *columns, *money], windows, "The last 7 and 30 days")
    view = data["windows"][str(data["days"])]
    currency = view.get("currency")
    by_day = [
        (
            row["day"],
            *figures(row, currency),
            tools(row, "byCalls", "calls"),
            tools(row, "byFailures", "failures"),
        )
        for row in view["byDay"]
    ]
    extra = ["most calls", "most failures"]
    out.table(["day (UTC)", *columns, *money, *extra], by_day, f"By day, last {data['days']}")
    by_model = [
        (
            row["model"],
            *figures(row, currency),
            tools(row, "byCalls", "calls"),
            tools(row, "byFailures", "failures"),
        )
        for row in view["byModel"]
    ]
    out.table(["model", *columns, *money, *extra], by_model, "By model")
    top = view["total"]["tools"]
    rows = [
        (t["tool"], f"{t['calls']:,}", f"{t['failures']:,}")
        for t in {t["tool"]: t for t in top["byCalls"] + top["byFailures"]}.values()
    ]
    out.table(["tool", "calls", "failures"], rows, "Tools")
