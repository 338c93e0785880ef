"""What reading the bridge's own stores (:mod:`.builtin_sqlite`, :mod:`.builtin_jsonl`) shares.

The bridge keeps its history in a built-in store when it is not pointed at a CallStore
server: SQLite files per workspace by default, or JSON-lines files. Both are read in
place and read-only, and converted to the documents the bridge would have sent over
CallStore (``docs/operations.md``, "Importing local history", lists the conversions).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bridge_store.errors import ConfigurationError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)

#: Run events per page read from a built-in store (and written as one item).
EVENTS_PAGE = 500


class UnreadableStore(ConfigurationError):
    """A built-in store that cannot be read as the bridge writes it; names the file."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"cannot import {path}: {why}")


def iso_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 timestamp as JavaScript's ``toISOString`` writes
    it (``2026-11-30T22:48:15.455Z``); what ``new Date(text).getTime()`` answers.

    Integer arithmetic on the parsed instant, so no float rounding moves a millisecond.
    A timestamp without a zone is UTC, as the bridge writes only UTC.
    """
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND
