"""``bridge-store demo``: a sample team's history in a store of its own, served."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..demo import DEFAULT_SEED
from ..errors import ConfigurationError
from ..security.tokens import TOKEN_ENV
from .shared.serve_options import add_listen_arguments

if TYPE_CHECKING:
    from ..demo.fill import Filled
    from ..demo.history import SampleHistory

DEMO_STORE_URL = "sqlite:///bridge-store-demo.db"
#: Beside serve's 8787 and ui's 8788, so the quick start's server and the demo can run
#: side by side.
DEMO_PORT = 8789
TOKENS_SUFFIX = ".tokens.toml"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="serve a sample team's history, to see the viewer at work (no Cursor key needed)",
        description=(
            "Write a sample team's history (two tenants, five people, ten agents over the "
            "past two weeks: prompts, thinking, tool calls, a failed run, a cancelled one, "
            "a long one) into a store of its own, then serve it as serve does, with named "
            "tokens: a tokens file beside the database, and a file per tenant whose token "
            "signs in to the viewer. Prints which token signs in to which tenant, then "
            "serve's ready line. A store that holds other history is refused unless "
            "--force; one holding the same sample (same seed) is served as it is."
        ),
    )
    demo.add_argument(
        "--store",
        metavar="URL",
        default=DEMO_STORE_URL,
        help="the store to write the sample into and serve (default: %(default)s)",
    )
    demo.add_argument(
        "--force",
        action="store_true",
        help="write the sample into a store that holds other history, or afresh",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="the same seed writes the same history, times counted back from now "
        "(default: %(default)s)",
    )
    add_listen_arguments(demo, DEMO_PORT)
    demo.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="serve's log level (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from ..client.viewer_access import sqlite_file, token_file_beside
    from ..demo.fill import Filled
    from ..demo.history import sample_history
    from ..demo.sign_in import write_tokens
    from ..server.serving import listen
    from ..urls import redact
    from .shared.serve_options import add_arguments
    from .shared.serve_run import serve

    if args.store.startswith("memory:"):
        # The sample is written before the server opens the store: memory:// would be a
        # new, empty store by then.
        raise ConfigurationError(
            "the demo writes its sample, then serves it: memory:// would be empty again; "
            "give a store that keeps what is written (sqlite:///, postgresql://, redis://)"
        )
    database = sqlite_file(args.store)
    base = database if database is not None else Path("bridge-store-demo.db")
    tokens_file = base.with_name(base.stem + TOKENS_SUFFIX)
    options = argparse.ArgumentParser(add_help=False)
    add_arguments(options)
    serve_args = options.parse_args(
        [
            *("--store", args.store, "--tokens-file", str(tokens_file.absolute())),
            *("--host", args.host, "--port", str(args.port), "--log-level", args.log_level),
        ]
    )
    # The port first, as serve does: nothing is written for a server that cannot listen.
    listen(args.host, args.port).close()
    sample = sample_history(seed=args.seed)
    started = time.monotonic()
    filled = asyncio.run(_fill(serve_args, sample, force=args.force))
    seconds = time.monotonic() - started
    sign_ins = write_tokens(tokens_file, token_file_beside(base))
    where = redact(args.store)
    if filled is Filled.KEPT:
        say(f"serving the sample history written before into {where} (--force writes it afresh)")
    elif filled is Filled.COMPLETED:
        say(f"wrote again the sample history a stopped start had begun in {where}")
    else:
        runs = sum(len(agent.runs) for agent in sample.agents)
        say(
            f"wrote a sample team's history into {where} in {seconds:.1f} s: "
            f"{len(sample.agents)} agents, {runs} runs, {sample.events:,} events "
            f"in tenants {' and '.join(sample.tenants)}"
        )
    say(
        "sign in to the viewer "
        + ", or ".join(
            f"as {who.name} (tenant {who.tenant}) with the token in {who.token_file}"
            for who in sign_ins
        )
    )
    # The environment's one token would stand beside the demo's named ones: not taken.
    environ = {name: value for name, value in os.environ.items() if name != TOKEN_ENV}
    return serve(serve_args, environ, sign_in_file=sign_ins[0].token_file)


async def _fill(serve_args: argparse.Namespace, sample: SampleHistory, *, force: bool) -> Filled:
    """The sample written into the stores serve will serve, sealed as serve seals them
    (its key file's variable counts), the schema made first."""
    from ..demo.fill import fill
    from ..urls import redact
    from .shared.store_options import stack_from

    async with stack_from(serve_args).opened(migrate=True) as stack:
        return await fill(stack.stores, sample, where=redact(serve_args.store), force=force)


def say(line: str) -> None:
    print(f"bridge-store demo: {line}", file=sys.stderr, flush=True)
