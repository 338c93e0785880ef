"""The history's statistics: what the overview counts per day and model, and the optional
capability a runs substore offers to count it from its own summaries.

An overview is made from three kinds of rows over a range of days: per (day, model)
the runs, failed runs and token sums (:class:`Totals`); each finished run's duration
(:class:`Duration`), for the medians and 95th percentiles; and per (day, model, tool)
the tool calls and failures (:class:`ToolCount`). A day is a UTC day number (epoch
milliseconds // :data:`DAY_MS`) of the run's time (``summarize_run``'s
``started_at``); the model is the run's ``model.id``.

The SQL backend counts them in the database (:class:`RunStatistics`: revision 0005's
run summaries and revision 0006's tool counts, kept as events are appended); every
other backend's are counted by reading the runs and their events. Either way a tool
call is counted by :func:`tool_outcome` of its events, so both count the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..types import Document
from ..wire.fields import MAX_KEY_BYTES, is_storable_key

DAY_MS = 24 * 60 * 60 * 1000
#: The token counts a run's usage carries, in the order pages show them.
TOKEN_KINDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
#: A run counts as failed with this status.
FAILED = "error"
#: The name a tool call without a usable one is counted under (as the transcript shows it).
UNNAMED_TOOL = "tool"


def label(text: Any) -> str | None:
    """A name as statistics keep it: a string any store can key by, else None."""
    if not isinstance(text, str) or not text or len(text) > MAX_KEY_BYTES:
        return None
    if not is_storable_key(text) or len(text.encode("utf-8")) > MAX_KEY_BYTES:
        return None
    return text


def tool_outcome(event: Document) -> tuple[str, bool] | None:
    """``(tool, failed)`` when ``event`` ends a tool call (status ``completed`` or
    ``error``), else None.

    Called for every appended event, so it reads only what it needs: a handful of dict
    lookups, and nothing more for the events that are not tool calls (nearly all).
    """
    payload = event.get("payload")
    if type(payload) is not dict or payload.get("type") != "sdk_message":
        return None
    message = payload.get("message")
    if type(message) is not dict or message.get("type") != "tool_call":
        return None
    status = message.get("status")
    if status != "completed" and status != "error":
        return None
    return label(message.get("name")) or UNNAMED_TOOL, status == "error"


@dataclass(frozen=True, slots=True)
class Totals:
    """The runs of one model on one day."""

    day: int
    model: str | None
    runs: int
    failed: int
    #: Sums over the runs that report each count (see ``history.TOKEN_KINDS``).
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class Duration(NamedTuple):
    """One finished run's duration. A tuple: an overview makes one per run of 30 days
    (82,000 over a store of a million runs a year), made straight from a row."""

    day: int
    model: str | None
    ms: int


@dataclass(frozen=True, slots=True)
class ToolCount:
    day: int
    model: str | None
    tool: str
    calls: int
    failures: int


@dataclass(slots=True)
class Counts:
    """What an overview is made from, for one tenant and one range of days."""

    totals: list[Totals] = field(default_factory=list)
    durations: list[Duration] = field(default_factory=list)
    tools: list[ToolCount] = field(default_factory=list)


@runtime_checkable
class RunStatistics(Protocol):
    """What a runs substore implements to count an overview itself.

    The :class:`Counts` of ``tenant``'s runs whose time (``summarize_run``'s
    ``started_at``) is in ``[since, until)``, in any order, with each (day, model) and
    (day, model, tool) once.
    """

    def covers(self, agents: object, runs: object) -> bool: ...

    async def counts(self, tenant: str, *, since: int, until: int) -> Counts: ...


def run_statistics(agents: object, runs: object) -> RunStatistics | None:
    """The capability of ``runs`` (a backend's own substore), if it covers ``agents``."""
    if isinstance(runs, RunStatistics) and runs.covers(agents, runs):
        return runs
    return None
