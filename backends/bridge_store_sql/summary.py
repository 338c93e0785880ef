"""A run's summary as the runs table keeps it beside the document (schema revision 0005).

Written by every runs create and update (:mod:`.runs`), filled for rows from before
by the revision's migration with this same function, and read by the history's run
list (:mod:`.history`) and the overview.
"""

from __future__ import annotations

from typing import Any

from bridge_store.backend.history import summarize_run
from bridge_store.types import Document

#: The summary columns of revision 0005, in the order :func:`summary_columns` fills them.
SUMMARY_COLUMNS = (
    "started_at",
    "status",
    "model_id",
    "duration_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "total_tokens",
)


def summary_columns(run: Document) -> dict[str, Any]:
    """The run's summary as the runs table holds it (unknown start: 0, the oldest)."""
    summary = summarize_run(run)
    tokens = summary.tokens or {}
    return {
        "started_at": summary.started_at if summary.started_at is not None else 0,
        "status": summary.status,
        "model_id": summary.model_id,
        "duration_ms": summary.duration_ms,
        "input_tokens": tokens.get("inputTokens"),
        "output_tokens": tokens.get("outputTokens"),
        "cache_read_tokens": tokens.get("cacheReadTokens"),
        "cache_write_tokens": tokens.get("cacheWriteTokens"),
        "total_tokens": summary.total_tokens,
    }
