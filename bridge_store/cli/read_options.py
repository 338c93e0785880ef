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
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..errors import Code, ConfigurationError, ConnectError
from ..security.auth import DEFAULT_TENANT, check_tenant, local_principal
from ..security.encryption import KEY_FILE_ENV, Keyring
from ..security.tokens import TOKEN_ENV, read_auth_token
from .keys import keyring_from
from .store_options import add_store_arguments, routes_from, store_urls

if TYPE_CHECKING:
    from ..viewer.reader import HistoryReader


def add_direct_read_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tenant`` and ``--encryption-key-file``: how a store read directly is read."""
    parser.add_argument(
        "--tenant",
        metavar="NAME",
        help=f"read this tenant's history (default: {DEFAULT_TENANT}, where the one-token "
        "shorthand and stores from before tenants keep theirs)",
    )
    parser.add_argument(
        "--encryption-key-file",
        metavar="PATH",
        help=f"the key file serve encrypts the store with, to open its sealed items "
        f"(env {KEY_FILE_ENV})",
    )


def direct_tenant(args: argparse.Namespace) -> str:
    try:
        # An empty --tenant is refused, not taken for the default tenant.
        return check_tenant(DEFAULT_TENANT if args.tenant is None else args.tenant)
    except ValueError as error:
        raise ConfigurationError(f"--tenant: {error}") from None


def direct_keyring(args: argparse.Namespace) -> Keyring | None:
    return keyring_from(args, os.environ)


def add_read_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser, "store to read")
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
    from ..plugins import get_plugin_manager
    from ..security.sealed_stores import seal_stores
    from ..stores import open_stores
    from ..viewer.reader import HistoryReader, RemoteCallStore, in_process

    if args.store_callback_url is not None:
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
        token = read_auth_token(args.store_auth_token_file, dict(os.environ))
        try:
            call = RemoteCallStore(args.store_callback_url, token)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        yield HistoryReader(call)
        return
    principal = local_principal(direct_tenant(args))
    keyring = direct_keyring(args)  # a bad key file fails before the store is opened
    # Reading never migrates: a store at an older schema is left for `db upgrade`.
    opened = await open_stores(get_plugin_manager(), routes_from(args), migrate=False)
    try:
        stores = seal_stores(opened.stores, keyring)
        # Whoever reads a store URL holds the whole store: it may learn its tenants.
        yield HistoryReader(
            in_process(lambda: stores, principal),
            tenant=principal.tenant,
            tenants=opened.stores.agents.tenants,
        )
    finally:
        await opened.close()


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


def run_reading(
    read: Callable[[HistoryReader, argparse.Namespace], Coroutine[Any, Any, None]],
    args: argparse.Namespace,
) -> int:
    """Run a history command; what the store refuses is one line on stderr, exit 1."""

    async def main() -> None:
        async with open_reader(args) as reader:
            try:
                await read(reader, args)
            except ConnectError as error:
                hint = await tenant_hint(reader) if error.code is Code.NOT_FOUND else None
                if hint is None:
                    raise
                raise ConnectError(error.code, f"{error.message}; {hint}") from None

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
