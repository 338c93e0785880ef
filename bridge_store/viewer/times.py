"""Stored times and durations as a person reads them, whatever the store accepted.

CallStore takes any integer within 2^53 of zero as a time (``createdAt``,
``startedAt``, ``endedAt``, ``updatedAt``): milliseconds since 1970 as the bridge
writes them, but also microseconds by mistake, negative numbers, or the year 10000.
A calendar date exists only for years 1 to 9999 (Python's ``datetime``), so every
reader (pages, their JSON read by the CLI, the Markdown export, the CLI's tables)
turns a stored time into text here, and only here: a time in that range is its UTC
date and time, any other the number stored, marked "out of range", never an error.
A duration (the difference of two stored times) outside zero to the calendar's span is
shown the same way: as its number of milliseconds, marked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

#: 0001-01-01 00:00:00 and 9999-12-31 23:59:59.999 UTC, in epoch milliseconds.
MIN_MS = -62_135_596_800_000
MAX_MS = 253_402_300_799_999
#: The longest duration two times of the calendar can be apart.
MAX_DURATION_MS = MAX_MS - MIN_MS
OUT_OF_RANGE = "out of range"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stored_integer(value: Any) -> int | None:
    """``value`` if it is an integer (a JSON number without a fraction), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def moment(value: Any) -> datetime | None:
    """The UTC date and time a stored time names; None if it names none."""
    ms = stored_integer(value)
    if ms is None or not MIN_MS <= ms <= MAX_MS:
        return None
    return _EPOCH + timedelta(milliseconds=ms)


def shown_time(value: Any, *, missing: str = "-") -> str:
    """A stored time as text: ``2026-05-28 12:00:00`` (UTC), or the number stored
    marked out of range; ``missing`` when there is no time."""
    ms = stored_integer(value)
    if ms is None:
        return missing
    at = moment(ms)
    if at is None:
        return f"{ms} ({OUT_OF_RANGE})"
    # Not strftime: it writes years before 1000 with fewer than four digits.
    return (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d} {at.hour:02d}:{at.minute:02d}:{at.second:02d}"
    )


def shown_utc(value: Any) -> str:
    """:func:`shown_time` saying "UTC" after a date (not after a number or "-")."""
    shown = shown_time(value)
    return shown + " UTC" if moment(value) is not None else shown


def iso_time(value: Any) -> str:
    """A stored time in ISO 8601 (for a ``<time datetime>``); "" if it names no date."""
    at = moment(value)
    return "" if at is None else at.isoformat()


def shown_duration(value: Any) -> str:
    """A duration in milliseconds as text: ``1.2 s``, ``3 min 4 s``, ``5 h 6 min``; one
    below zero or longer than the calendar as its milliseconds, marked out of range."""
    ms = stored_integer(value)
    if ms is None:
        return "-"
    if not 0 <= ms <= MAX_DURATION_MS:
        return f"{ms} ms ({OUT_OF_RANGE})"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def shown_offset(at: Any, start: Any) -> str:
    """When something happened, from a run's start: ``+1.2 s``, ``-3 min 4 s``.

    Measured only between two dates of the calendar: otherwise the moment itself (the
    start says nothing about it), and "" without both.
    """
    if stored_integer(at) is None or stored_integer(start) is None:
        return ""
    if moment(at) is None or moment(start) is None:
        return shown_utc(at)
    return ("+" if at >= start else "-") + shown_duration(abs(at - start))
