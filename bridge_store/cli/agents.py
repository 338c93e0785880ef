"""``bridge-store agents``: a store's agents, newest first, a page at a time."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..viewer import queries
from .shared.read_options import add_read_arguments, run_paging, tenant_hint

if TYPE_CHECKING:
    from .shared.read_options import Pages


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = commands.add_parser(
        "agents",
        help="list agents, newest first",
        description="List a store's agents, most recently updated first (archived ones only "
        "with --archived or --status archived), with their last run's status, their runs' "
        "tokens and who created them; an agent the SDK named 'New Agent' shows its first "
        "prompt. A table on a terminal, tab-separated rows otherwise; the cursor of the "
        "next page goes to stderr.",
    )
    agents.add_argument("--cwd", metavar="DIR", help="only agents of this working directory")
    agents.add_argument(
        "--workspace",
        metavar="ID",
        help="only agents of this workspace, any checkout and directory (e.g. github.com/org/app)",
    )
    agents.add_argument(
        "--status", choices=queries.AGENT_STATUSES, help="only agents with this status"
    )
    agents.add_argument("--name", metavar="TEXT", help="only agents whose name contains TEXT")
    agents.add_argument("--archived", action="store_true", help="include archived agents")
    agents.add_argument(
        "--limit",
        type=int,
        default=queries.DEFAULT_AGENTS_PAGE,
        metavar="N",
        help="page size (default: %(default)s)",
    )
    agents.add_argument("--cursor", help="continue from the cursor printed after a page")
    agents.add_argument("--json", action="store_true", help="one JSON document per line")
    add_read_arguments(agents)


def run(args: argparse.Namespace) -> int:
    return run_paging(_agents, args)


async def _agents(pages: Pages, args: argparse.Namespace) -> None:
    from ..viewer.terminal import AGENT_COLUMNS, Output, agent_row, json_line

    params = {
        "cwd": args.cwd,
        "workspace": args.workspace,
        "status": args.status,
        "name": args.name,
        "archived": "1" if args.archived else None,
        "cursor": args.cursor,
        "limit": str(queries.page_limit(args.limit, 1)),
    }
    page = await pages.page("", {key: value for key, value in params.items() if value})
    if args.json:
        for agent in page["agents"]:
            print(json_line(agent))
    else:
        Output(sys.stdout).table(AGENT_COLUMNS, map(agent_row, page["agents"]), "Agents")
    if page["next"]:
        print(f"more: --cursor {page['next']}", file=sys.stderr)
    elif not page["agents"] and args.cursor is None:
        hint = await tenant_hint(pages.reader)
        if hint is not None:
            print(f"bridge-store: no agents: {hint}", file=sys.stderr)
