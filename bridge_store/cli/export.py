"""``bridge-store export``: write a store's history into one portable archive."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ..errors import ConfigurationError, ConnectError
from .shared.store_options import add_store_arguments, add_tenants_argument
from .shared.transfer import end_of, opened, stopped


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export",
        help="write a store's history into one archive (a backup)",
        description=(
            "Write every agent with its runs, their events and its checkpoint blobs into one "
            "gzip-compressed tar with a versioned manifest and a SHA-256 per member "
            "(docs/archive.md). 'bridge-store import' restores it into any store. The "
            "archive is created readable by its owner only (0600). It holds every agent's "
            "blobEncryptionKey in the clear (export says so) unless the store is sealed "
            "and exported without --encryption-key-file, which would open them."
        ),
    )
    add_store_arguments(parser, "the store to export", key_file="read")
    parser.add_argument("--output", required=True, type=Path, metavar="FILE", help="the archive")
    add_tenants_argument(parser, "only this tenant's history")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_export(args))


async def _export(args: argparse.Namespace) -> int:
    from ..lifecycle.export import export_history
    from ..lifecycle.progress import Meter
    from ..lifecycle.tally import Tally
    from ..lifecycle.walk import count_agents, tenants_of

    stack, _ = end_of(args)
    async with opened(stack, migrate=False) as stores:
        meter = Meter(Tally(), verb=f"exported to {args.output}")
        try:
            tenants = await tenants_of(stores, args.tenant)
            async with meter.showing():
                if meter.live:
                    meter.agents_total = await count_agents(stores, tenants)
                exported = await export_history(
                    stores,
                    args.output,
                    tenants=tenants,
                    tally=meter.tally,
                    on_agent=meter.agent_done,
                )
        except ConnectError as error:
            raise stopped("export", error) from error
        except OSError as error:
            # The archive and its spools go next to --output: a directory that is
            # missing, not writable or full is the user's to fix, not a traceback.
            raise ConfigurationError(
                f"cannot write the archive {args.output}: {error.strerror}: "
                "choose an --output in a directory you can write, with room for the store"
            ) from None
    print(meter.summary())
    if exported.plaintext_keys:
        print(
            f"bridge-store: {args.output} holds the blobEncryptionKey of "
            f"{exported.plaintext_keys} agents in the clear: it is readable by you only "
            "(0600); keep it as secret as the store's keys",
            file=sys.stderr,
        )
    return 0
