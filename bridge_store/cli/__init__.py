"""The ``bridge-store`` command line: one module per command, composed here.

``serve`` (:mod:`.serve`), ``demo`` (:mod:`.demo`), ``bridge`` (:mod:`.bridge`),
``db upgrade``/``db current`` (:mod:`.db`), ``token add|list|revoke`` (:mod:`.token`),
``keys generate|rotate`` (:mod:`.keys`), ``prune`` (:mod:`.prune`), ``gc`` (:mod:`.gc`),
``copy``, ``export``, ``import`` and ``import-local`` (:mod:`.copy`, :mod:`.export`,
:mod:`.import_archive`, :mod:`.import_local`), ``export-runs``
(:mod:`.export_runs`), the history commands ``agents``, ``runs``, ``overview`` and
``transcript``, ``ui`` (:mod:`.ui`), ``config show`` (:mod:`.config`) and
``workspace-url`` (:mod:`.workspace_url`). What they
share is in :mod:`.shared`, never in another command: the store, tenant and key-file
options, reading and moving history, serve's config file, running under uvicorn.
Each command module has ``add_parser(commands)`` and ``run(args) -> exit status``.
Every command's parser is built on every start, so a command module imports at its top
only what its parser needs; what running it takes (uvicorn, the viewer, the lifecycle
code, Rich) is imported where it runs, and ``--help``, a mistyped flag or a short command
do not pay for the others (tests/test_cli.py checks it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from .. import __version__
from ..errors import (
    EXIT_CONFIGURATION,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    BackendUnreachable,
    ConfigurationError,
)
from . import (
    agents,
    bridge,
    config,
    copy,
    db,
    demo,
    export,
    export_runs,
    gc,
    import_archive,
    import_local,
    keys,
    overview,
    prices,
    prune,
    runs,
    serve,
    token,
    transcript,
    ui,
    workspace_url,
)
from .shared.parsers import CommandParser
from .shared.settings import apply_config_file
from .shared.wording import say


class Command(Protocol):
    """What a command module provides."""

    def add_parser(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """Add the command's parser to ``commands``."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command; its exit status. Raises ConfigurationError for bad set-ups."""


#: The commands, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {
    "serve": serve,
    "demo": demo,
    "bridge": bridge,
    "db": db,
    "token": token,
    "keys": keys,
    "prune": prune,
    "gc": gc,
    "copy": copy,
    "export": export,
    "export-runs": export_runs,
    "import": import_archive,
    "import-local": import_local,
    "agents": agents,
    "runs": runs,
    "overview": overview,
    "prices": prices,
    "transcript": transcript,
    "ui": ui,
    "config": config,
    "workspace-url": workspace_url,
}


def build_parser() -> argparse.ArgumentParser:
    # Every command's parser is of the same class: usage mistakes are one line.
    parser: argparse.ArgumentParser = CommandParser(
        prog="bridge-store",
        description=(
            "A storage server for Cursor SDK bridge agent history. Launch the bridge with "
            '--store-callback-url pointing here and --local-store \'{"type":"custom"}\'.'
        ),
    )
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(commands)
    return parser


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> argparse.Namespace:
    """``argv`` parsed, with the settings of a ``--config`` file where neither a flag nor
    an environment variable (``environ``, default ``os.environ``) gives them."""
    parser = build_parser()
    args = apply_config_file(parser, argv, parser.parse_args(argv), environ)
    refuse_nul(parser, args)
    return args


def refuse_nul(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """ConfigurationError naming the first argument (flag, positional or config file
    setting) that holds a NUL, before the command runs.

    No store keys by NUL and no name, path or URL holds one: left to a backend, a
    filter with a NUL was refused by Postgres and found nothing elsewhere.
    """
    for action in _chosen_actions(parser, args):
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if any(
            isinstance(each, str | os.PathLike) and "\x00" in os.fspath(each) for each in values
        ):
            if action.option_strings:
                label = max(action.option_strings, key=len)
            else:
                label = str(action.metavar or action.dest)  # as the usage line names it
            raise ConfigurationError(f"{label} must not contain NUL")


def _chosen_actions(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> Iterator[argparse.Action]:
    """The arguments of ``parser`` and of the (sub)commands ``args`` chose."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                yield from _chosen_actions(chosen, args)
        else:
            yield action


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        return COMMANDS[args.command].run(args)
    except ConfigurationError as error:
        # One line (two at most) naming the cause and the fix, never a traceback: a
        # start-up problem is the user's to fix, or a backend's to come back.
        say(f"bridge-store: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE if isinstance(error, BackendUnreachable) else EXIT_CONFIGURATION
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
