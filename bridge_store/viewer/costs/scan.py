"""Shares and counts summed by reading the runs, for stores that keep no per-day sums.

Memory, Redis and S3 stores answer the overview by reading every run of the tenant
(``runs.list``, a thousand at a time), the creators of those in range (``creators``,
as many at a time) and the events of the runs of the counted days (their tool calls),
in one pass that makes what the SQL backend reads from its tables: the day and agent
:class:`~bridge_store.backend.shares.Share` s and the
:class:`~bridge_store.backend.statistics.Counts`.

That costs time in proportion to the tenant's runs, so the pass stops after
``limit`` runs: a store that holds more answers that it would have to read them all
(the page says so in a line, in well under a second) rather than take seconds or
minutes. ``bridge-store overview`` reading a store itself has no such limit.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...backend.history import TOKEN_KINDS, summarize_run
from ...backend.shares import NO_TOKENS, Share, Span, TokenSums
from ...backend.statistics import DAY_MS, FAILED, Counts, Duration, ToolCount, Totals, tool_outcome
from ..activity import Activity
from ..reader import HistoryReader

#: Runs the viewer reads at most for one overview on a store without per-day sums.
SCAN_LIMIT = 5_000


@dataclass(slots=True)
class Scanned:
    counts: Counts = field(default_factory=Counts)
    day_shares: list[Share] = field(default_factory=list)
    agent_shares: list[Share] = field(default_factory=list)
    #: False when the pass stopped at its limit: nothing here is to be shown.
    complete: bool = True
    #: Runs read.
    read: int = 0


def _tokens(run_tokens: dict[str, int] | None) -> TokenSums:
    found = run_tokens or {}
    values = [found.get(kind, 0) for kind in TOKEN_KINDS]
    return (values[0], values[1], values[2], values[3])


class _Sums:
    """Shares keyed by (at, model, who), summed as runs come."""

    def __init__(self) -> None:
        self.cells: dict[tuple[int, str | None, str | None], list[int]] = defaultdict(
            lambda: [0, 0, *NO_TOKENS]
        )

    def add(self, key: tuple[int, str | None, str | None], failed: bool, tokens: TokenSums) -> None:
        cell = self.cells[key]
        cell[0] += 1
        cell[1] += failed
        for n, value in enumerate(tokens, start=2):
            cell[n] += value

    def shares(self) -> list[Share]:
        return [
            Share(at, model, who, c[0], c[1], (c[2], c[3], c[4], c[5]))
            for (at, model, who), c in self.cells.items()
        ]


def _span_of(cut: Sequence[Span], day: int) -> int | None:
    for n, (first, end) in enumerate(cut):
        if first <= day < end:
            return n
    return None


async def scan(
    reader: HistoryReader,
    activity: Activity,
    *,
    first_day: int,
    end_day: int,
    counted: Span,
    cut: Sequence[Span],
    limit: int | None,
) -> Scanned:
    """Day shares of days ``[first_day, end_day)``, agent shares of the spans ``cut``
    and the counts of the days ``counted``, reading at most ``limit`` runs."""
    found = Scanned()
    days, agents = _Sums(), _Sums()
    totals: dict[tuple[int, str | None], list[int]] = defaultdict(lambda: [0] * 6)
    tools: Counter[tuple[int, str | None, str]] = Counter()
    failures: Counter[tuple[int, str | None, str]] = Counter()
    async for batch in reader.every_run():
        found.read += len(batch)
        if limit is not None and found.read > limit:
            found.complete = False
            return found
        picked = []
        for run in batch:
            summary = summarize_run(run)
            day = (summary.started_at if summary.started_at is not None else 0) // DAY_MS
            if first_day <= day < end_day or _span_of(cut, day) is not None:
                picked.append((run, summary, day))
        refs = [(r["agentId"], r["runId"]) for r, _, _ in picked]
        # As stored (None: no record), as the SQL sums keep them.
        creators = await activity.stores().runs.creators(activity.tenant, refs) if refs else {}
        for run, summary, day in picked:
            failed, tokens, model = (
                summary.status == FAILED,
                _tokens(summary.tokens),
                summary.model_id,
            )
            if first_day <= day < end_day:
                creator = creators.get((run["agentId"], run["runId"]))
                days.add((day, model, creator), failed, tokens)
            span = _span_of(cut, day)
            if span is not None:
                agents.add((span, model, run["agentId"]), failed, tokens)
            if not counted[0] <= day < counted[1]:
                continue
            cell = totals[(day, model)]
            cell[0] += 1
            cell[1] += failed
            for n, value in enumerate(tokens, start=2):
                cell[n] += value
            if summary.duration_ms is not None:
                found.counts.durations.append(Duration(day, model, summary.duration_ms))
            async for event in reader.all_events(run["runId"]):
                outcome = tool_outcome(event)
                if outcome is not None:
                    tools[(day, model, outcome[0])] += 1
                    failures[(day, model, outcome[0])] += outcome[1]
    found.counts.totals = [Totals(day, model, *cell) for (day, model), cell in totals.items()]
    found.counts.tools = [ToolCount(*key, n, failures[key]) for key, n in tools.items()]
    found.day_shares, found.agent_shares = days.shares(), agents.shares()
    return found
