"""What the commands that move history share (``copy``, ``export``, ``import``,
``import-local``): opening both ends as serve does, and reporting the outcome.

Stores are opened as ``serve`` opens them, sealed with the key file of that end
(its flag, else ``BRIDGE_STORE_ENCRYPTION_KEY_FILE``): items are read in the clear
from a sealed source and sealed again for the target. Without key files, sealed values
travel as they are (an item's seal is bound to its tenant, agent and blob, which a
copy keeps), so the target then needs the source's key file to serve them; a store
written to without a key is refused if it holds sealed items already.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from ...errors import BackendUnreachable, ConfigurationError, ConnectError
from ...lifecycle.tally import Outcome, Tally
from ...security.sealed_probe import holds_sealed_items
from ...stack.stores import Stores, StoreStack
from ...urls import redact
from .store_options import key_file_flag, stack_from
from .wording import say

#: Exit status when items differ: left alone by copy or import, or found by --verify.
EXIT_DIFFERENT = 1


def end_of(args: argparse.Namespace, end: str | None = None) -> tuple[StoreStack, str]:
    """The stores of ``--store ...`` (``end`` None) or ``--END ...``, read as
    :mod:`.store_options` says, and how to name that end's key file."""
    return stack_from(args, end=end), key_file_flag(end)


@contextlib.asynccontextmanager
async def opened(
    stack: StoreStack, *, migrate: bool, key_flag: str | None = None
) -> AsyncIterator[Stores]:
    """The stores of ``stack``, started and sealed as serve would; closed on exit.

    ``key_flag`` (how the user gives this end's key file) marks a store written to:
    without a key, one that holds sealed items is refused, in one line naming it.
    """
    async with stack.opened(migrate=migrate) as started:
        own = started.stores.beneath()
        if not stack.layers and key_flag is not None and await holds_sealed_items(own):
            raise ConfigurationError(
                f"the store at {redact(stack.routes.agents)} holds sealed items: give its "
                f"key file ({key_flag}), so what is written is sealed too, not mixed in as "
                "plaintext"
            )
        yield started.stores


def stopped(what: str, error: ConnectError) -> BackendUnreachable:
    """The one-line error of a move stopped by a backend: rerunning resumes it."""
    return BackendUnreachable(f"{what} stopped: {error.message}; run it again to resume")


def report(tally: Tally) -> int:
    """Print the differences found; the exit status they call for."""
    for line in tally.differences:
        say(line)
    hidden = tally.different_total - len(tally.differences)
    if hidden > 0:
        print(f"... and {hidden} more")
    return EXIT_DIFFERENT if tally.total(Outcome.DIFFERENT) else 0
