"""The storage flags every command shares: one URL per substore, flag or environment."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from ...stores import Routes

STORE_ENV = "BRIDGE_STORE_URL"
DEFAULT_STORE_URL = "sqlite:///bridge-store.db"

#: Environment variables for the storage flags, read when the flag is not given.
STORE_FLAG_ENV = {
    "store": STORE_ENV,
    "agents": "BRIDGE_STORE_AGENTS_URL",
    "runs": "BRIDGE_STORE_RUNS_URL",
    "run_events": "BRIDGE_STORE_RUN_EVENTS_URL",
    "checkpoints": "BRIDGE_STORE_CHECKPOINTS_URL",
}


def add_store_arguments(parser: argparse.ArgumentParser, title: str = "storage") -> None:
    group = parser.add_argument_group(
        title,
        "Store URLs: sqlite:///PATH, memory://, postgresql://..., redis://..., "
        "redis+cluster://HOST:PORT,..., s3://BUCKET/PREFIX, or any scheme an installed plugin "
        "serves. Each substore can go to its own URL. A flag "
        "not given is read from its environment variable.",
    )
    group.add_argument(
        "--store",
        metavar="URL",
        help=(
            f"URL for every substore (env {STORE_ENV}; "
            f"default: {DEFAULT_STORE_URL}, a file in the current directory)"
        ),
    )
    for flag, name in (
        ("--agents", "agents"),
        ("--runs", "runs"),
        ("--run-events", "runEvents"),
        ("--checkpoints", "checkpoints"),
    ):
        env = STORE_FLAG_ENV[flag.removeprefix("--").replace("-", "_")]
        group.add_argument(
            flag, metavar="URL", help=f"URL for the {name} substore (env {env}; default: --store)"
        )


def store_urls(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """Each storage flag's URL: the flag, else its environment variable, else None."""
    environ = os.environ if environ is None else environ
    return {
        name: getattr(args, name) or environ.get(env) or None
        for name, env in STORE_FLAG_ENV.items()
    }


def routes_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Routes:
    urls = store_urls(args, environ)
    store = urls["store"] or DEFAULT_STORE_URL
    return Routes(
        agents=urls["agents"] or store,
        runs=urls["runs"] or store,
        run_events=urls["run_events"] or store,
        checkpoints=urls["checkpoints"] or store,
    )
