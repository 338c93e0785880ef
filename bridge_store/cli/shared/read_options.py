"""Where the history commands (``agents``, ``runs``, ``transcript``) read from.

A store URL read directly (``--store`` and the substore flags, as ``db`` takes them)
or a running server (``--store-callback-url`` and its token file, as ``bridge`` takes
them), both through the web viewer's :class:`~bridge_store.viewer.reader.HistoryReader`.
Read directly, a store is read as one tenant (``--tenant``), and with serve's key file
sealed items open as they do in serve; through a server, its token decides both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...backend.tenants import DEFAULT_TENANT
from ...errors import Code, ConfigurationError, ConnectError
from ...security.auth import Principal, local_principal
from ...security.tokens import TOKEN_ENV, read_auth_token
from .store_options import (
    KEY_FILE_USES,
    add_key_file_argument,
    add_store_arguments,
    add_tenant_argument,
    stack_from,
    store_urls,
    tenant_from,
)
from .wording import say

if TYPE_CHECKING:
    from ...stack.stores import Stores
    from ...types import Document
    from ...viewer.pages import Context
    from ...viewer.reader import HistoryReader


def add_direct_read_arguments(parser: argparse.ArgumentParser) -> None:
    """The store, ``--tenant`` and ``--encryption-key-file``: a store read directly."""
    add_store_arguments(parser, "store to read")
    add_tenant_argument(parser, "read this tenant's history")
    add_key_file_argument(parser, KEY_FILE_USES["read"])


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    add_direct_read_arguments(parser)
    server = parser.add_argument_group("or a running server")
    server.add_argument(
        "--store-callback-url", metavar="URL", help="read through the bridge-store server at URL"
    )
    server.add_argument(
        "--store-auth-token-file",
        metavar="PATH",
        help=f"file holding that server's bearer token (env {TOKEN_ENV} takes precedence)",
    )


@asynccontextmanager
async def open_reader(args: argparse.Namespace) -> AsyncIterator[HistoryReader]:
    from ...viewer.reader import HistoryReader, RemoteCallStore

    if args.store_callback_url is not None:
        check_remote(args)
        token = read_auth_token(args.store_auth_token_file, dict(os.environ))
        try:
            call = RemoteCallStore(
                args.store_callback_url, token, token_source=token_source(args, os.environ)
            )
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        yield HistoryReader(call)
        return
    async with open_direct(args) as (reader, _, _, _):
        yield reader


def token_source(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """Where the server's token was read, as read_auth_token reads it (never the token)."""
    if environ.get(TOKEN_ENV, "").strip():
        return f"${TOKEN_ENV}"
    return str(args.store_auth_token_file)


def check_remote(args: argparse.Namespace) -> None:
    """Refuse the flags of reading directly next to a server's URL."""
    if any(store_urls(args, {}).values()):
        raise ConfigurationError(
            "--store and the substore flags read a store directly; "
            "--store-callback-url reads through a running server"
        )
    if args.tenant is not None or args.encryption_key_file:
        raise ConfigurationError(
            "--tenant and --encryption-key-file are for reading a store directly; "
            "through a server, its token's tenant is read, opened with its keys"
        )


@asynccontextmanager
async def open_direct(
    args: argparse.Namespace,
) -> AsyncIterator[tuple[HistoryReader, Stores, Principal, Stores]]:
    """A store read directly as ``--tenant``'s local admin: its reader, the stores it
    reads (sealed as serve seals them), the principal, and the backends' own stores."""
    from ...viewer.reader import HistoryReader, in_process

    principal = local_principal(tenant_from(args))
    # Reading never migrates: a store at an older schema is left for `db upgrade`.
    async with stack_from(args).opened(migrate=False) as stack:
        stores, own = stack.stores, stack.stores.beneath()
        # Whoever reads a store URL holds the whole store: it may learn its tenants.
        reader = HistoryReader(
            in_process(lambda: stores, principal),
            tenant=principal.tenant,
            tenants=own.agents.tenants,
        )
        yield reader, stores, principal, own


class Pages(Protocol):
    """The viewer's page data and Markdown export, however they are read, and CallStore
    reads of the same history."""

    @property
    def reader(self) -> HistoryReader: ...

    async def page(self, path: str, params: dict[str, str]) -> Document: ...

    async def markdown(self, agent_id: str, run_id: str) -> str: ...


@dataclass(frozen=True, slots=True)
class LocalPages:
    """Page data made here, by the pages' own functions, over a store read directly."""

    context: Context

    @property
    def reader(self) -> HistoryReader:
        return self.context.reader

    async def markdown(self, agent_id: str, run_id: str) -> str:
        from ...viewer.export_pages import whole_transcript
        from ...viewer.markdown import transcript_markdown

        whole = await whole_transcript(self.context, agent_id, run_id)
        return "".join(transcript_markdown(**whole))

    async def page(self, path: str, params: dict[str, str]) -> Document:
        from starlette.datastructures import QueryParams

        from ...viewer import pages

        functions = {
            "": pages.agents,
            "agent": pages.agent,
            "runs": pages.runs,
            "overview": pages.overview,
        }
        view = await functions[path](self.context, QueryParams(params))
        return view.data


@asynccontextmanager
async def open_pages(args: argparse.Namespace) -> AsyncIterator[Pages]:
    """The page data a history command prints: through a server, its viewer's JSON
    (one view: the web page, its JSON and the command show the same data); read
    directly, the same page functions over the store."""
    from ...backend.history import run_history
    from ...backend.shares import run_shares
    from ...backend.statistics import run_statistics
    from ...viewer.activity import Activity
    from ...viewer.pages import Context
    from ...viewer.remote_pages import RemotePages
    from ...viewer.search import ScanSearch
    from .price_options import prices_from

    if args.store_callback_url is not None:
        check_remote(args)
        if getattr(args, "prices", None):
            raise ConfigurationError(
                "--prices prices a store read here (--store); through a server the pages "
                "are priced with the server's own table (serve --prices)"
            )
        token = read_auth_token(args.store_auth_token_file, dict(os.environ))
        try:
            remote = RemotePages(
                args.store_callback_url, token, token_source=token_source(args, os.environ)
            )
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        yield remote
        return
    # A bad price table is one line, before anything is read.
    prices = prices_from(args) if hasattr(args, "prices") else None
    async with open_direct(args) as (reader, stores, principal, backends):
        activity = Activity(
            lambda: stores,
            principal.tenant,
            lambda: run_history(backends.agents, backends.runs),
            lambda: run_statistics(backends.agents, backends.runs),
            lambda: run_shares(backends.agents, backends.runs),
        )
        # Read here, the overview reads every run of a store without per-day sums.
        context = Context(reader, ScanSearch(reader), activity, principal, prices, scan_limit=None)
        yield LocalPages(context)


async def tenant_hint(reader: HistoryReader) -> str | None:
    """Where the history is when the tenant read has none of what was asked for."""
    others = await reader.other_tenants()
    if not others:
        return None
    held = "tenant" if len(others) == 1 else "tenants"
    return (
        f"tenant {reader.tenant} holds none of it; this store holds history in {held} "
        f"{', '.join(others)}: choose one with --tenant {others[0]} (import-local writes "
        f"to tenant {DEFAULT_TENANT} unless given --tenant)"
    )


async def hinted(reader: HistoryReader, work: Coroutine[Any, Any, None]) -> None:
    """Run a command's work; a ``not_found`` says where the history is, if elsewhere."""
    try:
        await work
    except ConnectError as error:
        hint = await tenant_hint(reader) if error.code is Code.NOT_FOUND else None
        if hint is None:
            raise
        raise ConnectError(error.code, f"{error.message}; {hint}") from None


def run_reading(
    read: Callable[[HistoryReader, argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> int:
    """Run a history command; what the store refuses is one line on stderr, exit 1."""

    async def main() -> None:
        async with open_reader(args) as reader:
            await hinted(reader, read(reader, args))

    return run_main(main)


def run_paging(
    read: Callable[[Pages, argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> int:
    """Run a history command that prints page data, as :func:`run_reading` does."""

    async def main() -> None:
        async with open_pages(args) as pages:
            await hinted(pages.reader, read(pages, args))

    return run_main(main)


def run_main(main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run a history command's coroutine: the store's refusal is one line, exit 1."""
    try:
        asyncio.run(main())
    except ConnectError as error:
        say(f"bridge-store: {error.code.value}: {error.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `bridge-store transcript ... | head`: the reader left; nothing is wrong.
        sys.stderr.close()
        return 0
    return 0
