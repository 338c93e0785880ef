"""``bridge-store prune``: delete whole agents not updated for a while (retention)."""

from __future__ import annotations

import argparse
import asyncio
import time

from ..errors import BackendUnreachable, ConnectError
from ..lifecycle.durations import age_argument, describe_age
from ..lifecycle.prune import PRUNABLE_STATUSES, AgentFigures, PruneCriteria, PruneReport, prune
from .shared.store_options import add_store_arguments, add_tenants_argument, stack_from
from .shared.wording import counted, say


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "prune",
        help="delete agents not updated for a while, with their runs, events and blobs",
        description=(
            "Delete every agent whose updatedAt is older than --older-than, with its runs, "
            "their events and its checkpoint blobs (events, runs, blobs, then the agent), "
            "of every tenant unless --tenant says which. An agent that is running or has a "
            "queued or running run is never deleted. Every delete is audit-logged."
        ),
    )
    add_store_arguments(parser)
    add_criteria_arguments(parser)
    add_tenants_argument(parser, "prune only this tenant's agents")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing: list the agents that would go, with their runs, events, "
        "blobs and blob bytes",
    )


def add_criteria_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        required=True,
        type=age_argument,
        metavar="AGE",
        help="prune agents last updated longer ago than AGE: a number and a unit, "
        "s, m, h, d or w (90d)",
    )
    parser.add_argument("--cwd", metavar="DIR", help="only agents of this working directory")
    parser.add_argument(
        "--status",
        action="append",
        choices=PRUNABLE_STATUSES,
        help="only agents with this status (repeatable; default: any but running)",
    )


def criteria_from(args: argparse.Namespace, now: float) -> PruneCriteria:
    return PruneCriteria(
        cutoff_ms=int((now - args.older_than) * 1000),
        cwd=args.cwd,
        statuses=frozenset(args.status) if args.status else None,
        tenants=args.tenant,
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_prune(args))


async def _prune(args: argparse.Namespace) -> int:
    # Prune reads no secret: the backends' own stores, unsealed.
    async with stack_from(args, sealed=False).opened(migrate=False) as stack:
        try:
            report = await prune(
                stack.stores,
                criteria_from(args, time.time()),
                principal_name="prune",
                dry_run=args.dry_run,
            )
        except ConnectError as error:
            raise BackendUnreachable(f"prune stopped: {error.message}; run it again") from error
    age = describe_age(args.older_than)
    if args.dry_run:
        for agent in report.agents:
            say(f"would prune {_agent_line(agent)}")
    print(_summary(report, age, args.dry_run))
    return 0


def _agent_line(agent: AgentFigures) -> str:
    from ..viewer.times import shown_utc

    updated = shown_utc(agent.updated_at)
    return (
        f"agent {agent.agent_id} of tenant {agent.tenant} ({agent.status}, updated "
        f"{updated}, cwd {agent.cwd}): {counted(agent.runs, 'run')}, "
        f"{counted(agent.events or 0, 'event')}, {counted(agent.blobs, 'blob')} "
        f"({counted(agent.blob_bytes or 0, 'byte')})"
    )


def _summary(report: PruneReport, age: str, dry_run: bool) -> str:
    kept = f"; {report.skipped_active} with an active run kept" if report.skipped_active else ""
    agents = counted(len(report.agents), "agent")
    if dry_run:
        return (
            f"would prune {agents} older than {age}: {counted(report.runs, 'run')}, "
            f"{counted(report.events, 'event')}, {counted(report.blobs, 'blob')} "
            f"({counted(report.blob_bytes, 'byte')}){kept}"
        )
    return (
        f"pruned {agents} older than {age}: {counted(report.runs, 'run')} with "
        f"their events, {counted(report.blobs, 'blob')}{kept}"
    )
