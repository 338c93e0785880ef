"""``bridge-store workspace-url``: the store URL for a bridge started by hand.

``launch()`` and ``bridge-store bridge`` give their bridge a store URL that names the
checkout it works in (docs/team.md); a bridge started any other way opts in by being
given the URL this prints, for its ``--store-callback-url``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigurationError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "workspace-url",
        help="print the store URL that shares a checkout's agents with its workspace",
        description=(
            "Print the --store-callback-url for a cursor-sdk-bridge started by hand in DIR, "
            "so it shares agents with every checkout of the same repository (same origin "
            "remote, or the same workspace rule) in its tenant."
        ),
    )
    command.add_argument(
        "--store-callback-url", required=True, metavar="URL", help="the store server's URL"
    )
    command.add_argument(
        "--workspace", metavar="DIR", help="the bridge's working directory (default: here)"
    )
    command.add_argument(
        "--workspace-rule",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="a directory matching PATTERN (or under one) is in workspace NAME; before git",
    )


def run(args: argparse.Namespace) -> int:
    from ..client.workspace import bridge_workspace, rules_from

    directory = args.workspace or os.getcwd()
    where = bridge_workspace(args.store_callback_url, directory, rules_from(args.workspace_rule))
    if where.checkout is None:
        raise ConfigurationError(
            f"{directory} is in no workspace (no git checkout with an origin remote, no "
            "matching --workspace-rule): its agents keep their path, use the store's URL as it is"
        )
    print(where.store_url, file=sys.stdout)
    return 0
