"""``bridge-store runs [AGENT_ID]``: one agent's runs, or every agent's, newest first.

Without an agent, the history's run list across agents (the viewer's ``/ui/runs``):
filtered by status, model, workspace, dates and who started them, ordered by start,
duration or tokens, a page at a time (the next page's cursor goes to stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..backend.history import SORTS
from ..errors import ConfigurationError
from ..viewer import queries
from .shared.price_options import add_prices_argument
from .shared.read_options import add_read_arguments, run_paging, tenant_hint

if TYPE_CHECKING:
    from .shared.read_options import Pages

#: The run list's filters: flag -> the page's parameter.
FILTERS = {
    "status": "status",
    "model": "model",
    "cwd": "cwd",
    "workspace": "workspace",
    "since": "since",
    "until": "until",
    "by": "by",
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = commands.add_parser(
        "runs",
        help="list runs, newest first: one agent's, or every agent's",
        description="List one agent's runs, newest first: turn, status, model, start, "
        "duration, tokens, who started it and error. Without AGENT_ID, every agent's runs, "
        "filtered and ordered as the viewer's Runs page (the next page's cursor goes to "
        "stderr).",
    )
    runs.add_argument(
        "agent_id",
        metavar="AGENT_ID",
        nargs="?",
        help="the agent, as 'agents' lists it (leave it out for every agent's runs)",
    )
    across = runs.add_argument_group("every agent's runs (without AGENT_ID)")
    across.add_argument("--status", choices=queries.RUN_STATUSES, help="only runs with this status")
    across.add_argument("--model", metavar="ID", help="only runs of this model")
    across.add_argument(
        "--cwd", metavar="DIR", help="only runs of agents of this working directory"
    )
    across.add_argument(
        "--workspace",
        metavar="ID",
        help="only runs of agents of this workspace, any checkout and directory",
    )
    across.add_argument(
        "--since", metavar="YYYY-MM-DD", help="only runs started that UTC day or later"
    )
    across.add_argument(
        "--until", metavar="YYYY-MM-DD", help="only runs started that UTC day or earlier"
    )
    across.add_argument(
        "--by", metavar="TOKEN", help="only runs started by this token (unknown: none recorded)"
    )
    across.add_argument(
        "--sort", choices=SORTS, default="newest", help="order (default: %(default)s)"
    )
    across.add_argument(
        "--limit",
        type=int,
        default=queries.DEFAULT_RUNS_PAGE,
        metavar="N",
        help="page size (default: %(default)s)",
    )
    across.add_argument("--cursor", help="continue from the cursor printed after a page")
    runs.add_argument("--json", action="store_true", help="one JSON document per line")
    add_prices_argument(runs)
    add_read_arguments(runs)


def run(args: argparse.Namespace) -> int:
    if args.agent_id is not None:
        given = [f"--{flag}" for flag in (*FILTERS, "cursor") if getattr(args, flag)]
        if given or args.sort != "newest":
            given += ["--sort"] if args.sort != "newest" else []
            raise ConfigurationError(
                f"{', '.join(given)} filter every agent's runs: leave out AGENT_ID"
            )
    return run_paging(_runs, args)


async def _runs(pages: Pages, args: argparse.Namespace) -> None:
    from ..viewer.terminal import RUN_COLUMNS, RUNS_COLUMNS, Output, json_line, run_row, runs_row

    columns: tuple[str, ...]
    if args.agent_id is not None:
        data = await pages.page("agent", {"id": args.agent_id})
        rows, columns = list(map(run_row, data["runs"])), RUN_COLUMNS
        title = f"Runs of {data['agent'].get('name') or args.agent_id}"
    else:
        params = {
            page: getattr(args, flag) for flag, page in FILTERS.items() if getattr(args, flag)
        }
        params.update(sort=args.sort, limit=str(queries.page_limit(args.limit, 1)))
        if args.cursor:
            params["cursor"] = args.cursor
        data = await pages.page("runs", params)
        rows, columns, title = list(map(runs_row, data["runs"])), RUNS_COLUMNS, "Runs"
        narrowed, too_large = data.get("narrowed"), data.get("tooLarge")
        if narrowed:
            print(
                f"bridge-store: by cost, the runs since {narrowed['since']} (more than "
                f"{narrowed['limit']:,} runs match; --since/--until rank another range)",
                file=sys.stderr,
            )
        if too_large:
            print(
                f"bridge-store: more than {too_large['runs']:,} runs and no index: not listed",
                file=sys.stderr,
            )
        if data["next"]:
            since = f"--since {narrowed['since']} " if narrowed else ""
            print(f"more: {since}--cursor {data['next']}", file=sys.stderr)
        elif not data["runs"] and not args.cursor:
            hint = await tenant_hint(pages.reader)
            if hint is not None:
                print(f"bridge-store: no runs: {hint}", file=sys.stderr)
    if args.json:
        for each in data["runs"]:
            print(json_line(each))
        return
    Output(sys.stdout).table(columns, rows, title)
