"""What the commands print: counts ("1 run", "2 runs", never "1 runs"), and lines that
carry stored text as text."""

from __future__ import annotations

import sys
from typing import TextIO

from ...viewer.printable import printable_cell


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` and the noun that goes with it (``plural`` defaults to singular + s)."""
    noun = singular if number == 1 else (plural or f"{singular}s")
    return f"{number} {noun}"


def say(line: str, *, file: TextIO | None = None) -> None:
    """Print one line that may name stored things (ids, workspaces, statuses, a store's
    refusal quoting them): their control characters as visible stand-ins
    (:mod:`bridge_store.viewer.printable`), never sent to the terminal."""
    print(printable_cell(line), file=file if file is not None else sys.stdout)
