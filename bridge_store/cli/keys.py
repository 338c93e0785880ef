"""``bridge-store keys generate|rotate``: encryption keys and re-encrypting under them.

``generate`` puts a new random key first in the key file (created 0600): servers
started with it seal new items with that key and still open items sealed with the
others. ``rotate`` then re-encrypts everything already stored under the first key.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ..errors import ConfigurationError
from ..security.encryption import Keyring, load_keyring, new_key_line, read_key_file_text
from ..security.rotation import rotate
from ..security.tokens import write_private
from .shared.store_options import (
    add_key_file_argument,
    add_store_arguments,
    key_file_flag,
    key_file_from,
    stack_from,
)
from .shared.wording import counted


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser(
        "keys",
        help="manage encryption keys",
        description=(
            "Manage the keys that encrypt sdkMetadata and checkpoint blobs at rest "
            "(serve --encryption-key-file): one per line, the first encrypts, all decrypt."
        ),
    )
    actions = keys.add_subparsers(dest="action", required=True, metavar="COMMAND")
    generate = actions.add_parser(
        "generate",
        help="put a new random key first in the key file (created 0600)",
        description="Put a new random 256-bit key first in the key file, creating the file "
        "(mode 0600) if need be; the keys already in it stay, to decrypt.",
    )
    rotate_parser = actions.add_parser(
        "rotate",
        help="re-encrypt every stored item of every tenant under the first key",
        description=(
            "Re-encrypt every agent's sdkMetadata and every checkpoint blob, of every "
            "tenant, under the first key of the key file, including items stored before "
            "encryption was on. Items already under it are skipped: an interrupted run is "
            "resumed by running it again."
        ),
    )
    add_store_arguments(rotate_parser)
    for parser in (generate, rotate_parser):
        add_key_file_argument(parser, "the key file; it or its variable is required")


def run(args: argparse.Namespace) -> int:
    path = key_file_from(args)
    if path is None:
        raise ConfigurationError(f"name the key file: {key_file_flag()}")
    if args.action == "generate":
        return _generate(path)
    return asyncio.run(_rotate(args, load_keyring(path)))


def _generate(path: Path) -> int:
    existing = read_key_file_text(path) if path.exists() else ""
    if existing:
        load_keyring(path)  # refuse to add to a file that does not parse
    line = new_key_line()
    write_private(path, (line + "\n" + existing).rstrip("\n"))
    print(f"new key {line.rsplit(' ', 1)[1]} is first in {path}")
    return 0


async def _rotate(args: argparse.Namespace, keyring: Keyring) -> int:
    # Rotation opens and seals itself: it is given the backends' own stores.
    async with stack_from(args, sealed=False).opened(migrate=False) as stack:
        report = await rotate(stack.stores, keyring)
    print(
        f"re-encrypted under key {keyring.current_id.hex()}: "
        f"{counted(report.agents_rewritten, 'agent')} ({report.agents_current} already "
        f"{'was' if report.agents_current == 1 else 'were'}), "
        f"{counted(report.blobs_rewritten, 'blob')} ({report.blobs_current} already "
        f"{'was' if report.blobs_current == 1 else 'were'})"
    )
    return 0
