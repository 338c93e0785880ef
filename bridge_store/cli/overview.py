"""``bridge-store overview``: the last 7 and 30 days, and who spent what.

The viewer's Overview page as tables (runs, failed runs, tokens, durations, costs,
by day, model, agent and creator against the days before, the month's budget, the
tools with the most calls and failures), or its data as JSON; ``--by`` picks one
breakdown. Read from a store (``--store``), it is priced with ``--prices FILE`` (or
``BRIDGE_STORE_PRICES``); through a server, with the server's own table.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .shared.price_options import add_prices_argument
from .shared.read_options import add_read_arguments, run_paging, tenant_hint

if TYPE_CHECKING:
    from ..types import Document
    from .shared.read_options import Pages

KINDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
BREAKDOWNS = ("day", "model", "agent", "creator")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    overview = commands.add_parser(
        "overview",
        help="the last 7 and 30 days: runs, failures, tokens, costs, who spent what",
        description="The last 7 and 30 days of the history against the days before: runs, "
        "failed runs, tokens, durations and costs per day, model, agent and creator, the "
        "month's spend against the tenant's budget, and the tools with the most calls and "
        "failures (the viewer's Overview page).",
    )
    overview.add_argument(
        "--days", type=int, choices=(7, 30), default=7, help="the window shown in detail"
    )
    overview.add_argument("--to", metavar="YYYY-MM-DD", help="the last UTC day (default: today)")
    overview.add_argument(
        "--by", choices=BREAKDOWNS, help="print this breakdown only (default: every one)"
    )
    overview.add_argument("--json", action="store_true", help="the page's data as one JSON object")
    add_prices_argument(overview)
    add_read_arguments(overview)


def run(args: argparse.Namespace) -> int:
    async def show(pages: Pages, args: argparse.Namespace) -> None:
        params = {"days": str(args.days), **({"to": args.to} if args.to else {})}
        data = await pages.page("overview", params)
        windows = data.get("windows") or {}
        if not any(view["total"]["runs"] for view in windows.values()):
            hint = await tenant_hint(pages.reader)
            if hint is not None:
                print(f"bridge-store: no runs in these days: {hint}", file=sys.stderr)
        if args.json:
            from ..viewer.printable import terminal_json

            # Costs are decimal text: nothing here is a float, NaN or Infinity.
            print(terminal_json(data, allow_nan=False))
        else:
            print_overview(data, args.by)

    return run_paging(show, args)


def _money(value: str | None, currency: str) -> str:
    from ..viewer.templating import money

    return "unpriced" if value is None else money(value, currency)


def print_overview(data: Document, by: str | None = None) -> None:
    from ..viewer.terminal import Output
    from ..viewer.times import shown_duration

    out = Output(sys.stdout)
    if data.get("tooLarge"):
        runs = data["tooLarge"]["runs"]
        print(
            f"bridge-store: the tenant holds more than {runs:,} runs: not counted", file=sys.stderr
        )
        return
    priced = bool(data.get("priced"))
    currency = (data.get("prices") or {}).get("currency", "")
    money = ["cost"] if priced else []
    columns = ["runs", "failed", "input", "output", "cache read", "cache write", "median", "p95"]

    def figures(row: Document) -> list[str]:
        cells = [f"{row['runs']:,}", f"{row['failed']:,}"]
        cells += [f"{row['tokens'][kind]:,}" for kind in KINDS]
        cells += [shown_duration(row.get("medianMs")), shown_duration(row.get("p95Ms"))]
        if priced:
            cells.append(_money(row.get("cost"), currency))
        return cells

    def tools(row: Document, key: str, field: str) -> str:
        return ", ".join(f"{t['tool']} {t[field]:,}" for t in row["tools"][key]) or "-"

    if data.get("prices") and data["prices"].get("version"):
        version = data["prices"]["version"]
        print(f"priced in {currency} with price table {version['digest']} ({version['modified']})")
    budget = data.get("budget")
    if budget:
        print(
            f"budget {budget['month']}: {_money(budget['spent'], currency)} of "
            f"{_money(budget['budget'], currency)} in {budget['elapsedDays']} of "
            f"{budget['daysInMonth']} days; projected {_money(budget['projected'], currency)}"
        )
    windows = []
    for view in data["windows"].values():
        before = view["previous"]
        windows.append((f"{view['from']} to {view['to']}", *figures(view["total"])))
        windows.append((f"{before['from']} to {before['to']} (before)", *figures(before)))
    out.table(["days", *columns, *money], windows, "The last 7 and 30 days, and the days before")
    view = data["windows"][str(data["days"])]
    extra = ["most calls", "most failures"]
    if by in (None, "day"):
        rows = [
            (
                row["day"],
                *figures(row),
                tools(row, "byCalls", "calls"),
                tools(row, "byFailures", "failures"),
            )
            for row in view["byDay"]
        ]
        out.table(["day (UTC)", *columns, *money, *extra], rows, f"By day, last {data['days']}")
    if by in (None, "model"):
        rows = [
            (
                row["model"],
                *figures(row),
                tools(row, "byCalls", "calls"),
                tools(row, "byFailures", "failures"),
            )
            for row in view["byModel"]
        ]
        out.table(["model", *columns, *money, *extra], rows, "By model")
    for key, name, title, part in (
        ("agent", "name", "By agent", "byAgent"),
        ("creator", "creator", "By person (token)", "byCreator"),
    ):
        if by in (None, key):
            _who(out, data[part], name, title, priced, currency)
    if by is None:
        top = view["total"]["tools"]
        rows = [
            (t["tool"], f"{t['calls']:,}", f"{t['failures']:,}")
            for t in {t["tool"]: t for t in top["byCalls"] + top["byFailures"]}.values()
        ]
        out.table(["tool", "calls", "failures"], rows, "Tools")


def _who(out: object, part: Document, name: str, title: str, priced: bool, currency: str) -> None:
    from ..viewer.terminal import Output

    assert isinstance(out, Output)
    money = ["cost", "before: cost"] if priced else []
    rows = []
    for row in [*part["rows"], *([part["others"]] if part["others"] else [])]:
        shown = row.get(name) or row.get("agentId") or f"{row.get('count', 0):,} more"
        cells = [
            shown,
            f"{row['runs']:,}",
            f"{row['failed']:,}",
            f"{sum(row['tokens'].values()):,}",
        ]
        cells.append(f"{row['previous']['runs']:,}")
        if priced:
            cells += [
                _money(row.get("cost"), currency),
                _money(row["previous"].get("cost"), currency),
            ]
        rows.append(tuple(cells))
    out.table([name, "runs", "failed", "tokens", "before: runs", *money], rows, title)
