"""What the commands that move history share (``copy``, ``export``, ``import``): their
store flags, opening both ends as serve does, and reporting the outcome.

Stores are opened as ``serve`` opens them, sealed with the key file given for that
end: items are read in the clear from a sealed source (its key file opens them) and
sealed again for the target with its own key file. Without key files, sealed values
travel as they are (an item's seal is bound to its tenant, agent and blob, which a
copy keeps), so the target then needs the source's key file to serve them.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from ...errors import BackendUnreachable, ConnectError
from ...lifecycle.tally import Outcome, Tally
from ...plugins import get_plugin_manager
from ...security.auth import check_tenant
from ...security.encryption import load_keyring
from ...security.sealed_stores import seal_stores
from ...stores import Routes, Stores, resolve

#: Exit status when items differ: left alone by copy or import, or found by --verify.
EXIT_DIFFERENT = 1

_SUBSTORE_FLAGS = (
    ("agents", "agents", "agents"),
    ("runs", "runs", "runs"),
    ("run-events", "run_events", "runEvents"),
    ("checkpoints", "checkpoints", "checkpoints"),
)


def add_end_arguments(parser: argparse.ArgumentParser, end: str, role: str) -> None:
    """``--END URL``, ``--END-agents URL`` ... and ``--END-encryption-key-file``."""
    group = parser.add_argument_group(
        f"the {role} (--{end})",
        "Store URLs as serve's --store, --agents, --runs, --run-events, --checkpoints.",
    )
    group.add_argument(f"--{end}", metavar="URL", required=True, help=f"URL of the {role}")
    for flag, _, name in _SUBSTORE_FLAGS:
        group.add_argument(
            f"--{end}-{flag}", metavar="URL", help=f"URL of the {role}'s {name} (default: --{end})"
        )
    group.add_argument(
        f"--{end}-encryption-key-file",
        metavar="PATH",
        help=f"the key file serve uses for the {role}, to open or seal its secrets",
    )


def add_store_argument(parser: argparse.ArgumentParser, role: str) -> None:
    """``--store URL`` with per-substore flags, as :func:`add_end_arguments` for ``store``."""
    group = parser.add_argument_group(role, "Store URLs as serve's.")
    # role names the store ("the store to export"): "URL of the the store" otherwise.
    group.add_argument("--store", metavar="URL", required=True, help=f"URL of {role}")
    for flag, _, name in _SUBSTORE_FLAGS:
        group.add_argument(f"--{flag}", metavar="URL", help=f"URL of {name} (default: --store)")
    group.add_argument(
        "--encryption-key-file",
        metavar="PATH",
        help="the key file serve uses for this store, to open or seal its secrets",
    )


def add_tenant_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tenant",
        action="append",
        type=_tenant,
        metavar="TENANT",
        help="only this tenant's history (repeatable; default: every tenant)",
    )


def _tenant(text: str) -> str:
    try:
        return check_tenant(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def routes_of(args: argparse.Namespace, end: str | None) -> tuple[Routes, Path | None]:
    """The routes and key file of ``--END...`` (``end``) or ``--store ...`` (None)."""
    prefix = "" if end is None else f"{end}_"
    store: str = getattr(args, "store" if end is None else end)

    def url(attribute: str) -> str:
        given: str | None = getattr(args, f"{prefix}{attribute}")
        return given or store

    key_file = getattr(args, f"{prefix}encryption_key_file")
    routes = Routes(
        agents=url("agents"),
        runs=url("runs"),
        run_events=url("run_events"),
        checkpoints=url("checkpoints"),
    )
    return routes, Path(key_file) if key_file else None


@contextlib.asynccontextmanager
async def opened(routes: Routes, key_file: Path | None, *, migrate: bool) -> AsyncIterator[Stores]:
    """The stores of ``routes``, started and sealed as serve would; closed on exit."""
    keyring = load_keyring(key_file) if key_file is not None else None
    started = await resolve(get_plugin_manager(), routes).start(migrate=migrate)
    try:
        yield seal_stores(started.stores, keyring)
    finally:
        await started.close()


def stopped(what: str, error: ConnectError) -> BackendUnreachable:
    """The one-line error of a move stopped by a backend: rerunning resumes it."""
    return BackendUnreachable(f"{what} stopped: {error.message}; run it again to resume")


def report(tally: Tally) -> int:
    """Print the differences found; the exit status they call for."""
    for line in tally.differences:
        print(line)
    hidden = tally.different_total - len(tally.differences)
    if hidden > 0:
        print(f"... and {hidden} more")
    return EXIT_DIFFERENT if tally.total(Outcome.DIFFERENT) else 0
