"""Ages on the command line: ``90d``, ``12h``, ``30m``, ``2w``, ``45s``."""

from __future__ import annotations

import argparse
import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_AGE = re.compile(r"(\d+)([smhdw])")


def parse_age(text: str) -> float:
    """Seconds in ``text`` (a whole number and a unit, s m h d w); ValueError otherwise."""
    match = _AGE.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"{text!r} is not an age: give a positive number and a unit, like 90d")
    return float(int(match.group(1)) * _UNITS[match.group(2)])


def age_argument(text: str) -> float:
    """:func:`parse_age` as an argparse ``type``."""
    try:
        return parse_age(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def describe_age(seconds: float) -> str:
    """``seconds`` in the largest unit that divides it (``7776000`` is ``90d``)."""
    whole = int(seconds)
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def age_text(text: str) -> str:
    """An argparse ``type`` that checks an age and keeps its text (``90d``), so that
    ``config show`` writes it back as it was given."""
    age_argument(text)
    return text.strip()
