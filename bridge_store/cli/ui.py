"""``bridge-store ui``: the history viewer alone, read-only, for a store no server runs on."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from .. import __version__
from ..security.auth import SHORTHAND_TOKEN_NAME, Scope, TokenEntry, TokenRegistry, token_digest
from ..security.tokens import TOKEN_ENV, load_or_generate
from ..stack.stores import StoreStack
from ..viewer import UI_PATH
from .shared.price_options import add_prices_argument, prices_from
from .shared.read_options import add_direct_read_arguments
from .shared.serve_options import add_listen_arguments
from .shared.store_options import stack_from, tenant_from

DEFAULT_PORT = 8788


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ui = commands.add_parser(
        "ui",
        help="serve the history viewer alone, read-only",
        description="Serve the web history viewer (no CallStore endpoint, no migrations) over "
        "a store no server runs on. Prints 'bridge-store ready {JSON}' on stderr once "
        "listening; sign in with the token, which reads --tenant's history.",
    )
    add_listen_arguments(ui, DEFAULT_PORT)
    ui.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=f"the token to sign in with: read from PATH, or generated into PATH (mode 0600) "
        f"if it does not exist. Env {TOKEN_ENV} takes precedence; with neither, "
        f"./bridge-store.token is used that way",
    )
    add_direct_read_arguments(ui)
    add_prices_argument(ui)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..server.serving import UVICORN_SETTINGS, listen, run_announcing
    from ..viewer.standalone import create_ui_app  # Starlette and Jinja2 load only here

    tenant = tenant_from(args)
    # Bad URLs, missing extras and a bad key file fail before anything listens.
    stack = stack_from(args)
    prices = prices_from(args)
    # So does a store that cannot be read (a SQLite file that does not exist, a server
    # that refuses the login): opened once here, its failure is one line, not the
    # traceback uvicorn prints for a lifespan that fails.
    asyncio.run(_open_and_close(stack))
    # The port first: nothing is written (a token file) by a viewer that cannot listen.
    listener = listen(args.host, args.port)
    token = load_or_generate(args.auth_token_file, dict(os.environ))
    host, port = listener.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    viewer_url = f"http://{shown_host}:{port}{UI_PATH}/"
    # viewerUrl as serve's ready line has it, so a reader of either finds the viewer there.
    ready = {"url": viewer_url, "version": __version__, "viewerUrl": viewer_url}
    if token.generated_file is not None:
        ready["authTokenFile"] = str(token.generated_file)
    config = uvicorn.Config(
        create_ui_app(stack, _reader_of(token.value, tenant), prices),
        log_level="warning",
        **UVICORN_SETTINGS,
    )
    if prices.path is None:
        return run_announcing(config, ready, listener)

    async def follow_prices() -> None:
        # SIGHUP reads the price table again, as for serve (see PriceBook).
        loop = asyncio.get_running_loop()
        prices.follow_on(loop)
        loop.add_signal_handler(signal.SIGHUP, prices.request_reload)

    signal.signal(signal.SIGHUP, lambda signum, frame: prices.request_reload())
    try:
        return run_announcing(config, ready, listener, follow_prices)
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


async def _open_and_close(stack: StoreStack) -> None:
    async with stack.opened(migrate=False):
        pass


def _reader_of(token: str, tenant: str) -> TokenRegistry:
    """The one token the viewer takes: reads ``tenant`` (the viewer only reads anyway)."""
    entry = TokenEntry(SHORTHAND_TOKEN_NAME, token_digest(token), tenant, Scope.READ)
    return TokenRegistry([entry])
