"""``bridge-store import-local``: bring the history a bridge kept in its own stores.

Reads the bridge's built-in SQLite stores (every workspace under
``~/.cursor/projects``, or those under ``--from``) and JSONL stores (``--jsonl``) in
place and read-only (:mod:`bridge_store.lifecycle.builtin_sqlite`,
:mod:`~bridge_store.lifecycle.builtin_jsonl`), and writes what they hold into a
store through a :class:`~bridge_store.lifecycle.sink.StoreSink`: an item already
there identically is skipped, so importing again imports nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..backend.tenants import DEFAULT_TENANT
from ..errors import Code, ConfigurationError, ConnectError
from ..wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
from .shared.store_options import add_store_arguments, add_tenant_argument, tenant_from
from .shared.transfer import end_of, opened, report, stopped

if TYPE_CHECKING:
    from ..lifecycle.items import Item


class BuiltinStore(Protocol):
    def items(self, tenant: str) -> Iterator[Item]: ...


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "import-local",
        help="import the history a bridge kept in its own SQLite or JSONL store",
        description=(
            "Import the agents, runs, run events and checkpoint blobs a bridge kept before it "
            "was pointed at bridge-store: its default SQLite stores (every workspace under "
            "~/.cursor/projects, or under --from) and its JSONL stores (--jsonl). They are "
            "read in place, read-only, also while a bridge uses them. Importing again "
            "imports nothing new; an item the store holds differently is reported and left "
            "alone (exit status 1) unless --overwrite."
        ),
    )
    add_store_arguments(parser, "the store to import into", key_file="write")
    parser.add_argument(
        "--from",
        dest="sources",
        action="append",
        type=Path,
        metavar="DIR",
        help=(
            "a built-in SQLite store, or a directory to find them in (a home, .cursor or "
            "projects directory); repeatable (default: ~/.cursor/projects unless --jsonl)"
        ),
    )
    parser.add_argument(
        "--jsonl",
        action="append",
        type=Path,
        metavar="DIR",
        help='a JSONL store: the rootDir of --local-store \'{"type":"jsonl",...}\'; repeatable',
    )
    add_tenant_argument(
        parser,
        "the tenant the history goes to; a named token reads its own tenant only: import "
        "into the tenant of the tokens that will read it",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace items the store holds differently (and rewrite differing event logs)",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="N",
        help=(
            "serve's --max-request-bytes: a checkpoint blob larger is refused, as the "
            "server would refuse it (default: %(default)s)"
        ),
    )


def builtin_stores(sources: list[Path] | None, jsonl: list[Path] | None) -> list[BuiltinStore]:
    """The stores to import: SQLite ones found under ``sources`` (the bridge's default
    place when neither is given), then the JSONL ones."""
    from ..lifecycle.builtin_jsonl import JsonlStore
    from ..lifecycle.builtin_sqlite import default_root, stores_of

    roots = sources if sources is not None else ([] if jsonl else [default_root()])
    found: list[BuiltinStore] = []
    for root in roots:
        stores = stores_of([root])
        if not stores:
            raise ConfigurationError(
                f"no built-in store (an sdk-agent-store with an index.db) under {root}: "
                "name one with --from DIR, or a JSONL store with --jsonl DIR"
            )
        found += stores
    for directory in jsonl or []:
        store = JsonlStore(directory)
        if not store.exists():
            raise ConfigurationError(
                f"{directory} holds no JSONL store (agents.ndjson, runs.ndjson): name the "
                "rootDir the bridge was given"
            )
        found.append(store)
    return found


def run(args: argparse.Namespace) -> int:
    if args.max_request_bytes < 1:
        raise ConfigurationError(
            f"--max-request-bytes must be positive, not {args.max_request_bytes}"
        )
    tenant = tenant_from(args)
    stores = builtin_stores(args.sources, args.jsonl)
    return asyncio.run(_import(args, tenant, stores))


async def _import(args: argparse.Namespace, tenant: str, stores: list[BuiltinStore]) -> int:
    from ..lifecycle.checks import InvalidItem
    from ..lifecycle.items import AgentItem
    from ..lifecycle.progress import Meter
    from ..lifecycle.sink import StoreSink
    from ..lifecycle.tally import Outcome, Tally

    stack, key_flag = end_of(args)
    async with opened(stack, migrate=True, key_flag=key_flag) as target:
        meter = Meter(Tally(), verb="imported")
        sink = StoreSink(
            target,
            overwrite=args.overwrite,
            tally=meter.tally,
            max_blob_bytes=args.max_request_bytes,
        )
        try:
            async with meter.showing():
                for store in stores:
                    try:
                        for item in store.items(tenant):
                            await sink.write(item)
                            if isinstance(item, AgentItem):
                                meter.agent_done()
                    except InvalidItem as error:  # what a CallStore call would be refused
                        raise ConfigurationError(f"cannot import {store}: {error}") from None
        except ConnectError as error:
            if error.code == Code.UNAVAILABLE:
                raise stopped("import-local", error) from error
            # The store refused an item (a source log with a gap, say): not an outage.
            raise ConfigurationError(f"import-local stopped: {error.message}") from None
    tally = meter.tally
    print(
        f"imported {tally.total(Outcome.CREATED)}, already present {tally.total(Outcome.SAME)}, "
        f"different {tally.total(Outcome.DIFFERENT)}, replaced {tally.total(Outcome.REPLACED)}"
    )
    print(meter.summary())
    print(_where_it_went(tenant))
    return report(tally)


def _where_it_went(tenant: str) -> str:
    """Who reads the imported history: a token sees only its own tenant."""
    if tenant == DEFAULT_TENANT:
        return (
            f"into tenant {tenant}: serve's one token reads it; a named token reads only its "
            f"own tenant (import again with --tenant NAME for it)"
        )
    return (
        f"into tenant {tenant}: its tokens read it, and so does 'bridge-store agents "
        f"--tenant {tenant}' with this --store"
    )
