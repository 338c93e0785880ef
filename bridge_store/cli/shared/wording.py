"""Counts in what the commands print: "1 run", "2 runs", never "1 runs"."""

from __future__ import annotations


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` and the noun that goes with it (``plural`` defaults to singular + s)."""
    noun = singular if number == 1 else (plural or f"{singular}s")
    return f"{number} {noun}"
