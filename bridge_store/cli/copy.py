"""``bridge-store copy``: copy history from one store to another, resumably."""

from __future__ import annotations

import argparse
import asyncio

from ..errors import ConnectError
from .shared.store_options import add_end_arguments, add_tenants_argument
from .shared.transfer import EXIT_DIFFERENT, end_of, opened, report, stopped
from .shared.wording import say


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "copy",
        help="copy agents, runs, events and blobs from one store to another",
        description=(
            "Copy every agent with its runs, their events (seq, offset, createdAt and "
            "idempotency keys unchanged) and its checkpoint blobs from --from to --to, "
            "through the backend API, so any two backends work. Rerun it after an "
            "interruption: what was copied is skipped. An item the target holds "
            "differently is reported and left alone (exit status 1) unless --overwrite. "
            "The target's schema is brought to the latest version first."
        ),
    )
    add_end_arguments(parser, "from", "source")
    add_end_arguments(parser, "to", "target")
    add_tenants_argument(parser, "only this tenant's history")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace items the target holds differently (and rewrite differing event logs)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="then compare both stores (counts, a digest per agent); exit 1 on a difference",
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_copy(args))


async def _copy(args: argparse.Namespace) -> int:
    from ..lifecycle.copy import copy_history
    from ..lifecycle.progress import Meter
    from ..lifecycle.tally import Tally
    from ..lifecycle.verify import verify
    from ..lifecycle.walk import count_agents, tenants_of

    source_stack, _ = end_of(args, "from")
    target_stack, target_flag = end_of(args, "to")
    async with (
        opened(source_stack, migrate=False) as source,
        opened(target_stack, migrate=True, key_flag=target_flag) as target,
    ):
        meter = Meter(Tally(), verb="copied")
        try:
            tenants = await tenants_of(source, args.tenant)
            async with meter.showing():
                if meter.live:
                    meter.agents_total = await count_agents(source, tenants)
                await copy_history(
                    source,
                    target,
                    tenants=tenants,
                    overwrite=args.overwrite,
                    tally=meter.tally,
                    on_agent=meter.agent_done,
                )
            print(meter.summary())
            status = report(meter.tally)
            if not args.verify:
                return status
            comparison = await verify(source, target, args.tenant)
        except ConnectError as error:
            raise stopped("copy", error) from error
    for line in comparison.differences:
        say(line)
    print(comparison.summary())
    return status if comparison.same else EXIT_DIFFERENT
