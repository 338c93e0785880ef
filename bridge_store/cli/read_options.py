"""Where the history commands (``agents``, ``runs``, ``transcript``) read from.

A store URL read directly (``--store`` and the substore flags, as ``db`` takes them)
or a running server (``--store-callback-url`` and its token file, as ``bridge`` takes
them), both through the web viewer's :class:`~bridge_store.viewer.reader.HistoryReader`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from ..auth import local_principal
from ..errors import ConfigurationError, ConnectError
from ..plugins import get_plugin_manager
from ..stores import open_stores
from ..tokens import TOKEN_ENV, read_auth_token
from ..viewer.reader import HistoryReader, RemoteCallStore, in_process
from .store_options import add_store_arguments, routes_from, store_urls


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser, "store to read")
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
    if args.store_callback_url is not None:
        if any(store_urls(args, {}).values()):
            raise ConfigurationError(
                "--store and the substore flags read a store directly; "
                "--store-callback-url reads through a running server"
            )
        token = read_auth_token(args.store_auth_token_file, dict(os.environ))
        try:
            call = RemoteCallStore(args.store_callback_url, token)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        yield HistoryReader(call)
        return
    # Reading never migrates: a store at an older schema is left for `db upgrade`.
    opened = await open_stores(get_plugin_manager(), routes_from(args), migrate=False)
    try:
        yield HistoryReader(in_process(lambda: opened.stores, local_principal()))
    finally:
        await opened.close()


def run_reading(
    read: Callable[[HistoryReader, argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> int:
    """Run a history command; what the store refuses is one line on stderr, exit 1."""

    async def main() -> None:
        async with open_reader(args) as reader:
            await read(reader, args)

    try:
        asyncio.run(main())
    except ConnectError as error:
        print(f"bridge-store: {error.code.value}: {error.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `bridge-store transcript ... | head`: the reader left; nothing is wrong.
        sys.stderr.close()
        return 0
    return 0
