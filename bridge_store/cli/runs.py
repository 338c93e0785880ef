"""``bridge-store runs AGENT_ID``: one agent's runs, newest first."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..viewer import queries
from .read_options import add_read_arguments, run_reading

if TYPE_CHECKING:
    from ..viewer.reader import HistoryReader


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = commands.add_parser(
        "runs",
        help="list an agent's runs, newest first",
        description="List one agent's runs, newest first: turn, status, model, start, "
        "duration, tokens and error.",
    )
    runs.add_argument("agent_id", metavar="AGENT_ID", help="the agent, as 'agents' lists it")
    runs.add_argument("--json", action="store_true", help="one JSON document per line")
    add_read_arguments(runs)


def run(args: argparse.Namespace) -> int:
    return run_reading(_runs, args)


async def _runs(reader: HistoryReader, args: argparse.Namespace) -> None:
    from ..viewer.terminal import RUN_COLUMNS, Output, json_line, run_row

    data = await queries.agent_page(reader, args.agent_id)
    if args.json:
        for each in data["runs"]:
            print(json_line(each))
        return
    title = f"Runs of {data['agent'].get('name') or args.agent_id}"
    Output(sys.stdout).table(RUN_COLUMNS, map(run_row, data["runs"]), title)
