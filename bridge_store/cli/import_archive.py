"""``bridge-store import``: restore an archive written by ``export`` into a store."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ..errors import Code, ConfigurationError, ConnectError
from ..wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
from .shared.store_options import add_store_arguments, add_tenants_argument
from .shared.transfer import EXIT_DIFFERENT, end_of, opened, report, stopped
from .shared.wording import say


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "import",
        help="restore an archive written by export into a store",
        description=(
            "Check the archive whole (format version, every member's SHA-256), then write "
            "its agents, runs, events (seqs kept) and blobs into the store. Rerun it after "
            "an interruption: what was imported is skipped. An item the store holds "
            "differently is reported and left alone (exit status 1) unless --overwrite. "
            "An archive that is damaged or holds what a CallStore call would be refused is "
            "refused whole, in one line (exit status 2), before anything is written. "
            "The store's schema is brought to the latest version first."
        ),
    )
    add_store_arguments(parser, "the store to import into", key_file="write")
    parser.add_argument("--input", required=True, type=Path, metavar="FILE", help="the archive")
    add_tenants_argument(parser, "only this tenant's history")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace items the store holds differently"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="then compare the store with the archive (counts, a digest per agent)",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="N",
        help=(
            "serve's --max-request-bytes: a blob or a line larger is refused, as the "
            "server would refuse it (default: %(default)s)"
        ),
    )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_import(args))


async def _import(args: argparse.Namespace) -> int:
    from ..lifecycle.archive import ArchiveError
    from ..lifecycle.importer import census_of, check_archive, import_archive
    from ..lifecycle.progress import Meter
    from ..lifecycle.tally import Tally
    from ..lifecycle.verify import census, compare

    limit = args.max_request_bytes
    if limit < 1:
        raise ConfigurationError(f"--max-request-bytes must be positive, not {limit}")
    try:
        manifest = await asyncio.to_thread(check_archive, args.input, limit=limit)
    except ArchiveError as error:
        raise ConfigurationError(str(error)) from None
    stack, key_flag = end_of(args)
    async with opened(stack, migrate=True, key_flag=key_flag) as stores:
        meter = Meter(Tally(), verb=f"imported from {args.input}")
        meter.agents_total = len(manifest.agents)
        try:
            async with meter.showing():
                await import_archive(
                    stores,
                    args.input,
                    tenants=args.tenant,
                    overwrite=args.overwrite,
                    tally=meter.tally,
                    on_agent=meter.agent_done,
                    limit=limit,
                )
            print(meter.summary())
            status = report(meter.tally)
            if not args.verify:
                return status
            expected = census_of(manifest, args.tenant)
            held = await census(stores, args.tenant or sorted(manifest.tenants))
        except ConnectError as error:
            if error.code == Code.UNAVAILABLE:
                raise stopped("import", error) from error
            # The store refused an item (two events of a run with one idempotency key,
            # say): not an outage, so not "run it again".
            raise ConfigurationError(f"import stopped: {error.message}") from None
        except ArchiveError as error:
            raise ConfigurationError(str(error)) from None
    comparison = compare(expected, held)
    for line in comparison.differences:
        say(line)
    print(comparison.summary().replace("the copy", "the store"))
    return status if comparison.same else EXIT_DIFFERENT
