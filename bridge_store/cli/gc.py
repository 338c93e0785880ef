"""``bridge-store gc``: find and delete orphans (items whose agent or run is gone)."""

from __future__ import annotations

import argparse
import asyncio

from ..errors import BackendUnreachable, ConnectError
from ..lifecycle.gc import GcReport, TenantOrphans, collect_garbage
from .shared.store_options import add_store_arguments, add_tenants_argument, stack_from
from .shared.wording import counted, say


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "gc",
        help="delete orphans: blobs and runs whose agent is gone, events whose run is gone",
        description=(
            "Find and delete orphans, which a crash in the middle of a deletion, an "
            "interrupted copy or a third-party writer can leave: checkpoint blobs and runs "
            "of an agent that does not exist, and the events of a run id that no run has. "
            "Every tenant unless --tenant says which; every delete is audit-logged."
        ),
    )
    add_store_arguments(parser)
    add_tenants_argument(parser, "collect only this tenant's orphans")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing: list the orphans, with event counts and blob bytes",
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_gc(args))


async def _gc(args: argparse.Namespace) -> int:
    async with stack_from(args, sealed=False).opened(migrate=False) as stack:
        try:
            report = await collect_garbage(stack.stores, dry_run=args.dry_run, tenants=args.tenant)
        except ConnectError as error:
            raise BackendUnreachable(f"gc stopped: {error.message}; run it again") from error
    if args.dry_run:
        for orphans in report.tenants:
            for line in _orphan_lines(orphans):
                say(f"would delete {line}")
    print(_summary(report, args.dry_run))
    return 0


def _orphan_lines(orphans: TenantOrphans) -> list[str]:
    of = f"of tenant {orphans.tenant}"
    lines = [
        f"{counted(len(blob_ids), 'checkpoint blob')} of agent {agent_id} {of}: the agent is gone"
        for agent_id, blob_ids in orphans.blobs.items()
    ]
    lines.extend(
        f"run {run_id} of agent {agent_id} {of}: the agent is gone"
        for agent_id, run_ids in orphans.runs.items()
        for run_id in run_ids
    )
    lines.extend(
        f"the events of run {run_id} {of}: the run is gone" for run_id in orphans.event_logs
    )
    return lines


def _summary(report: GcReport, dry_run: bool) -> str:
    blobs, runs = counted(report.blobs, "orphaned blob"), counted(report.runs, "run")
    logs = counted(report.event_logs, "run")
    if dry_run:
        return (
            f"would delete {blobs} ({counted(report.blob_bytes, 'byte')}), {runs} and the "
            f"events of {logs} ({counted(report.events, 'event')})"
        )
    return f"deleted {blobs}, {runs} and the events of {logs}"
