"""Runs across agents: a run's summary, the filters and orders of the history's run list,
and the optional capability a backend offers to answer them from its own indexes.

CallStore lists one agent's runs by turn; a team lead asks for every run of the tenant,
newest first (or longest, or with the most tokens, or costliest at the prices of the
moment), filtered. :class:`RunHistory` is what a runs
substore implements to answer that itself (the SQL backend, from summary columns of
schema revision 0005); everywhere else the viewer reads the runs through CallStore and
orders them here, with the same :func:`summarize_run` and :class:`RunKey`, so both ways
give the same pages. ``tests/test_runs_page.py`` checks that they do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..errors import invalid_argument
from ..types import Document
from ..wire.cursors import cursor_id, cursor_integer, decode_cursor, encode_cursor
from ..wire.fields import MAX_SAFE_INTEGER

# TOKEN_KINDS is defined with the statistics (the price table reads it from there) and
# read from here by every reader of a run's usage.
from .statistics import TOKEN_KINDS as TOKEN_KINDS
from .statistics import label

if TYPE_CHECKING:
    from ..pricing.table import PriceTable

#: How the run list can be ordered: newest first, longest first, most tokens first,
#: costliest first (with a price table).
Sort = Literal["newest", "duration", "tokens", "cost"]
SORTS: tuple[Sort, ...] = ("newest", "duration", "tokens", "cost")
#: A cost's sort value is in millionths of a unit, within what a cursor carries.
COST_KEY_SCALE = 10**9
#: The sort value of a run without a duration or tokens: after every run that has one.
MISSING = -1
#: How a run without a recorded creator is shown, and the creator filter that finds it
#: (with any a token actually named so: the filter finds what the page shows).
UNKNOWN = "unknown"


def count(value: Any) -> int | None:
    """A token count from a usage object: a JSON number (not a bool), truncated like the
    transcript's usage, within what every store's integers hold; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (abs(value) <= MAX_SAFE_INTEGER):
        return None  # also NaN
    number = int(value)
    return number if abs(number) <= MAX_SAFE_INTEGER else None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What the run list filters, orders and totals a run by, from its document alone."""

    #: ``startedAt``, else ``createdAt`` (the run's place in time), else None.
    started_at: int | None
    status: str | None
    model_id: str | None
    duration_ms: int | None
    #: Each of :data:`TOKEN_KINDS` the usage reports; None when it reports none.
    tokens: dict[str, int] | None
    #: ``totalTokens`` if reported, else the sum of the kinds; None without usage.
    total_tokens: int | None


def summarize_run(run: Document) -> RunSummary:
    """The run's summary. The SQL backend stores it in columns as runs are written, and
    its migration fills them for older rows with this same function."""
    started = run.get("startedAt")
    if not isinstance(started, int):
        started = run.get("createdAt")
    started = started if isinstance(started, int) and not isinstance(started, bool) else None
    ended = run.get("endedAt")
    duration = None
    if started is not None and isinstance(ended, int) and not isinstance(ended, bool):
        duration = ended - started
    status = run.get("status")
    model = run.get("model")
    model_id = model.get("id") if isinstance(model, dict) else None
    usage = run.get("usage")
    tokens: dict[str, int] | None = None
    total = None
    if isinstance(usage, dict):
        found = {kind: count(usage.get(kind)) for kind in (*TOKEN_KINDS, "totalTokens")}
        reported = {kind: value for kind, value in found.items() if value is not None}
        if reported:
            total = reported.pop("totalTokens", None)
            tokens = reported
            if total is None:
                total = sum(reported.values())
    return RunSummary(
        started_at=started,
        # Strings any store can key by (no NUL, a key's length): what the columns hold.
        status=label(status),
        model_id=label(model_id),
        duration_ms=duration,
        tokens=tokens,
        total_tokens=total,
    )


@dataclass(frozen=True, slots=True)
class RunFilters:
    """The run list's filters; None means any. Times are epoch milliseconds, ``until``
    exclusive; ``creator`` is a token name (:data:`UNKNOWN`: runs without a record)."""

    status: str | None = None
    model: str | None = None
    cwd: str | None = None
    since: int | None = None
    until: int | None = None
    creator: str | None = None
    #: A workspace id (docs/team.md): runs of its agents, in any of its directories.
    workspace: str | None = None

    def shows_creator(self, creator: str | None) -> bool:
        """Whether a run of this creator (None: no record) passes the creator filter."""
        return self.creator is None or (creator or UNKNOWN) == self.creator

    def matches(self, summary: RunSummary) -> bool:
        """The filters a run's summary decides (workspace and creator need more)."""
        if self.status is not None and summary.status != self.status:
            return False
        if self.model is not None and summary.model_id != self.model:
            return False
        started = summary.started_at if summary.started_at is not None else 0
        if self.since is not None and started < self.since:
            return False
        return self.until is None or started < self.until


@dataclass(frozen=True, slots=True, order=True)
class RunKey:
    """A run's place in a sorted run list, as tuples compare: the list is descending."""

    value: int
    started: int
    agent_id: str
    run_id: str

    def cursor(self, sort: Sort) -> str:
        return encode_cursor(
            f"history-{sort}", self.value, self.started, self.agent_id, self.run_id
        )


def cost_key(cost: int | None) -> int:
    """A cost (``pricing.money`` units) as the run list sorts it: whole millionths of a
    unit (toward zero), within a cursor's integers; :data:`MISSING` for no cost."""
    if cost is None:
        return MISSING
    micro = abs(cost) // COST_KEY_SCALE
    return max(-MAX_SAFE_INTEGER, min(MAX_SAFE_INTEGER, -micro if cost < 0 else micro))


def run_key(
    sort: Sort, run: Document, summary: RunSummary, prices: PriceTable | None = None
) -> RunKey:
    started = summary.started_at if summary.started_at is not None else 0
    if sort == "cost":
        cost = None
        if prices is not None:
            cost = prices.run_cost(summary.model_id, summary.started_at, summary.tokens)
        value = cost_key(cost)
    elif sort == "duration":
        value = summary.duration_ms if summary.duration_ms is not None else MISSING
    elif sort == "tokens":
        value = summary.total_tokens if summary.total_tokens is not None else MISSING
    else:
        value = started
    return RunKey(value, started, run["agentId"], run["runId"])


#: How far from zero a sort value reaches: a duration is two times of up to 2^53 apart,
#: a sum of the four token kinds four counts of up to 2^53 each.
MAX_SORT_VALUE = 4 * MAX_SAFE_INTEGER
_SORT_VALUE = re.compile(r"-?[0-9]{1,17}")


def _sort_value(text: str, field: str) -> int:
    if _SORT_VALUE.fullmatch(text) is None or abs(int(text)) > MAX_SORT_VALUE:
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    return int(text)


def parse_run_key(cursor: str | None, sort: Sort) -> RunKey | None:
    """The key a cursor of this sort carries; ``invalid_argument`` for anything else."""
    if not cursor:
        return None
    field = "runs"
    value, started, agent_id, run_id = decode_cursor(cursor, f"history-{sort}", field, 4)
    return RunKey(
        _sort_value(value, field),
        cursor_integer(started, field),
        cursor_id(agent_id, field),
        cursor_id(run_id, field),
    )


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run of the list and who created it (None: nobody recorded)."""

    run: Document
    creator: str | None
    #: Its sort value as the backend ordered it by (the cost sort's, worked out there).
    key: int | None = None


@runtime_checkable
class RunHistory(Protocol):
    """What a runs substore implements to list a tenant's runs across agents itself.

    Pages are keyset pages, descending by :class:`RunKey` of ``sort``: the runs whose
    key is below ``after`` (all, without it), ``limit`` of them, matching ``filters``
    (the workspace is the run's agent's ``cwd``). Only ``tenant``'s runs. The
    ``cost`` sort prices each run with ``prices`` (:func:`cost_key`) and gives each
    row the value it sorted it by.
    """

    def covers(self, agents: object, runs: object) -> bool:
        """Whether these agents and runs substores are the ones this answers for."""
        ...

    async def runs_page(
        self,
        tenant: str,
        filters: RunFilters,
        sort: Sort,
        *,
        after: RunKey | None,
        limit: int,
        prices: PriceTable | None = None,
    ) -> Sequence[RunRow]: ...


def run_history(agents: object, runs: object) -> RunHistory | None:
    """The capability of ``runs`` (a backend's own substore), if it covers ``agents``."""
    if isinstance(runs, RunHistory) and runs.covers(agents, runs):
        return runs
    return None
