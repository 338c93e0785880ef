"""``bridge-store db upgrade`` and ``bridge-store db current``: SQL schemas by hand."""

from __future__ import annotations

import argparse
import asyncio

from ..errors import BackendUnreachable, ConnectError
from ..urls import redact
from .shared.store_options import add_store_arguments, stack_from


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = commands.add_parser("db", help="manage SQL schemas", description="Manage SQL schemas.")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    upgrade = db_commands.add_parser(
        "upgrade",
        help="upgrade every configured store to the latest schema",
        description="Upgrade every configured SQL store to the latest schema (serve does it "
        "on start unless --no-migrate); stores of other backends have no schema. Then keep "
        "each agent whose cwd is a git checkout (with an origin remote) readable on this "
        "machine against its workspace, so every checkout of that repository shares it "
        "(docs/team.md); other agents keep their path.",
    )
    upgrade.add_argument(
        "--workspace-rule",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="a directory matching PATTERN (or under one) is in workspace NAME; before git",
    )
    add_store_arguments(upgrade)
    current = db_commands.add_parser(
        "current",
        help="show the schema revision of every configured store",
        description="Show the schema revision of every configured SQL store.",
    )
    add_store_arguments(current)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_db(args))


async def _db(args: argparse.Namespace) -> int:
    upgrading = args.db_command == "upgrade"
    for url, backend in stack_from(args, sealed=False).backends.items():
        # Starting with migrate is the upgrade: a backend started without it warns that
        # an old schema will fail calls, which is no news to someone upgrading it.
        try:
            await backend.start(migrate=upgrading)
        except ConnectError as error:
            raise BackendUnreachable(
                f"cannot start the store at {redact(url)}: {error.message}"
            ) from error
        try:
            revision = await backend.schema_revision()
            shown = revision or "(no schema)"
            print(f"{redact(url)}: upgraded to {shown}" if upgrading else f"{redact(url)}: {shown}")
        finally:
            await backend.close()
    if upgrading:
        from ..lifecycle.workspaces import record_workspaces
        from ..workspaces.identity import parse_rule

        rules = [parse_rule(rule) for rule in args.workspace_rule]
        async with stack_from(args, sealed=False).opened(migrate=False) as stack:
            counts = await record_workspaces(stack.stores, rules=rules)
        # A store with no agent by a path (a new one, or one upgraded before) has
        # nothing to say here.
        if counts.recorded or counts.left:
            print(
                f"workspaces: {counts.recorded} agent(s) now kept against their workspace, "
                f"{counts.left} keep their path"
            )
    return 0
