"""The options every command names its store by: the store URL, one URL per substore,
the tenant and the key file, each with its environment variable and help.

One definition for every command, so they all read the same environment the same way:
a flag not given is read from its variable (:data:`STORE_FLAG_ENV`, ``KEY_FILE_ENV``),
a substore's URL defaults to ``--store``, and ``--store`` to :data:`DEFAULT_STORE_URL`.
``copy`` names two stores: the target (``--to``) is the store these variables name,
the one serve serves; the source (``--from``) is given on the command line, and opens
with the same key file unless ``--from-encryption-key-file`` names its own.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ...backend.tenants import DEFAULT_TENANT, check_tenant
from ...errors import ConfigurationError
from ...security.encryption import KEY_FILE_ENV
from ...stack.stores import Routes, StoreStack

if TYPE_CHECKING:
    from ...security.encryption import Keyring

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

#: Each substore's flag (after ``--`` or ``--END-``), destination and name.
_SUBSTORES = (
    ("agents", "agents", "agents"),
    ("runs", "runs", "runs"),
    ("run-events", "run_events", "runEvents"),
    ("checkpoints", "checkpoints", "checkpoints"),
)
#: The one end of ``copy`` the environment names (see the module's docstring).
ENVIRONMENT_END = "to"

_SCHEMES = (
    "Store URLs: sqlite:///PATH, memory://, postgresql://..., redis://..., "
    "redis+cluster://HOST:PORT,..., s3://BUCKET/PREFIX, or any scheme an installed plugin "
    "serves. Each substore can go to its own URL. A flag not given is read from its "
    "environment variable."
)
#: What the key file is for, by what the command does with the store.
KEY_FILE_USES = {
    "serve": "encrypt sdkMetadata and checkpoint blobs at rest (AES-256-GCM) with the keys "
    "in PATH, one per line: the first encrypts, all decrypt; see 'bridge-store keys'",
    "read": "the key file serve encrypts the store with, to open its sealed items",
    "write": "the key file serve encrypts the store with: what is written is sealed with "
    "it, and a store holding sealed items is not written without it",
}


def add_store_arguments(
    parser: argparse.ArgumentParser, title: str = "storage", *, key_file: str | None = None
) -> None:
    """``--store`` and the substore flags; with ``key_file`` (a :data:`KEY_FILE_USES`
    key), ``--encryption-key-file`` too."""
    group = parser.add_argument_group(title, _SCHEMES)
    group.add_argument(
        "--store",
        metavar="URL",
        help=(
            f"URL for every substore (env {STORE_ENV}; "
            f"default: {DEFAULT_STORE_URL}, a file in the current directory)"
        ),
    )
    for flag, dest, name in _SUBSTORES:
        group.add_argument(
            f"--{flag}",
            metavar="URL",
            help=f"URL for the {name} substore (env {STORE_FLAG_ENV[dest]}; default: --store)",
        )
    if key_file is not None:
        add_key_file_argument(group, KEY_FILE_USES[key_file])


def add_key_file_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, use: str, flag: str = ""
) -> None:
    """``--encryption-key-file`` (``--FLAG-encryption-key-file`` with ``flag``)."""
    prefix = f"{flag}-" if flag else ""
    parser.add_argument(
        f"--{prefix}encryption-key-file", metavar="PATH", help=f"{use} (env {KEY_FILE_ENV})"
    )


def add_end_arguments(parser: argparse.ArgumentParser, end: str, role: str) -> None:
    """``--END URL``, ``--END-agents URL`` ... and ``--END-encryption-key-file``: one of
    the two stores of ``copy``."""
    environment = end == ENVIRONMENT_END
    group = parser.add_argument_group(
        f"the {role} (--{end})",
        "Store URLs as serve's --store, --agents, --runs, --run-events, --checkpoints"
        + (", read from the same environment variables when not given." if environment else "."),
    )
    if environment:
        group.add_argument(
            f"--{end}",
            metavar="URL",
            help=f"URL of the {role} (env {STORE_ENV}; default: {DEFAULT_STORE_URL})",
        )
    else:
        group.add_argument(f"--{end}", metavar="URL", required=True, help=f"URL of the {role}")
    for flag, dest, name in _SUBSTORES:
        env = f"env {STORE_FLAG_ENV[dest]}; " if environment else ""
        group.add_argument(
            f"--{end}-{flag}",
            metavar="URL",
            help=f"URL of the {role}'s {name} ({env}default: --{end})",
        )
    use = "to seal what is written" if environment else "to open its sealed items"
    add_key_file_argument(group, f"the key file serve uses for the {role}, {use}", end)


def store_urls(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """Each storage flag's URL: the flag, else its environment variable, else None."""
    environ = os.environ if environ is None else environ
    return {
        name: getattr(args, name) or environ.get(env) or None
        for name, env in STORE_FLAG_ENV.items()
    }


def routes_from(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None, end: str | None = None
) -> Routes:
    """The routes of ``--store ...`` (``end`` None) or of ``--END ...``."""
    if end is not None and end != ENVIRONMENT_END:
        environ = {}
    if end is not None:
        # --END and --END-agents ... read as --store and --agents ... are.
        flags = {name: getattr(args, f"{end}_{name}") for name in STORE_FLAG_ENV if name != "store"}
        args = argparse.Namespace(**flags, store=getattr(args, end))
    urls = store_urls(args, environ)
    store = urls["store"] or DEFAULT_STORE_URL
    return Routes(
        agents=urls["agents"] or store,
        runs=urls["runs"] or store,
        run_events=urls["run_events"] or store,
        checkpoints=urls["checkpoints"] or store,
    )


def key_file_from(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None, end: str | None = None
) -> Path | None:
    """The key file of ``--encryption-key-file`` (``--END-...``), else of its variable."""
    environ = os.environ if environ is None else environ
    given = getattr(args, "encryption_key_file" if end is None else f"{end}_encryption_key_file")
    path = given or environ.get(KEY_FILE_ENV)
    return Path(path) if path else None


def keyring_from(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None, end: str | None = None
) -> Keyring | None:
    """The keyring of :func:`key_file_from`, if there is a key file; a bad file fails."""
    from ...security.encryption import load_keyring

    path = key_file_from(args, environ, end)
    return load_keyring(path) if path is not None else None


def stack_from(
    args: argparse.Namespace, *, end: str | None = None, sealed: bool = True
) -> StoreStack:
    """The stores of ``--store ...`` (or ``--END ...``), resolved (a bad URL fails now)
    and, when ``sealed``, sealed with the key file: a bad key file fails before anything
    is opened."""
    from ...security.sealed_stores import sealing

    layers = sealing(keyring_from(args, end=end)) if sealed else []
    return StoreStack.of(routes_from(args, end=end), layers=layers)


def key_file_flag(end: str | None = None) -> str:
    """How the user names the key file of ``end``, for a message that asks for it."""
    flag = "--encryption-key-file" if end is None else f"--{end}-encryption-key-file"
    return f"{flag} PATH or {KEY_FILE_ENV}"


def add_tenants_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--tenant``, repeatable: the tenants a command over many works on."""
    parser.add_argument(
        "--tenant",
        action="append",
        type=_tenant,
        metavar="TENANT",
        help=f"{what} (repeatable; default: every tenant)",
    )


def add_tenant_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--tenant``, once: the one tenant a command reads or writes (:func:`tenant_from`)."""
    parser.add_argument(
        "--tenant", metavar="NAME", help=f"{what} (default: {DEFAULT_TENANT}, {_DEFAULT_IS})"
    )


_DEFAULT_IS = "where the one-token shorthand and stores from before tenants keep theirs"


def tenant_from(args: argparse.Namespace) -> str:
    """The one ``--tenant``, checked; an empty one is refused, not taken for the default."""
    try:
        return check_tenant(DEFAULT_TENANT if args.tenant is None else args.tenant)
    except ValueError as error:
        raise ConfigurationError(f"--tenant: {error}") from None


def _tenant(text: str) -> str:
    try:
        return check_tenant(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
