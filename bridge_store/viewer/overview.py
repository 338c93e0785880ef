"""The overview: the last 7 and 30 days of the tenant's runs, per day and per model.

Runs, failed runs, tokens (input, output, cache read, cache write), the median and
95th percentile of the durations, and the tools with the most calls and the most
failures. Made from the
:class:`~bridge_store.backend.statistics.Counts` of the last 30 days (the 7 days are a part of
them), counted by the backend when it can (:class:`~bridge_store.backend.statistics.
RunStatistics`: SQL, from summaries kept as runs are written and events appended) or
by reading every run of those days and its events through the reader (a scan, whose
cost docs/viewer.md gives). What the runs cost, and who spent it, is
:mod:`.costs`'s.

Percentiles are nearest-rank: the value at rank ``ceil(p/100 * n)`` of the ``n``
sorted durations, so the median of 4 runs is the second, and a p95 is always a
duration a run really had.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import chain

from ..backend.history import TOKEN_KINDS, summarize_run
from ..backend.statistics import DAY_MS, FAILED, Counts, Duration, ToolCount, Totals, tool_outcome
from ..types import Document
from .activity import Activity
from .reader import HistoryReader
from .times import moment, shown_time

WINDOWS = (7, 30)
#: How many tools each "top" list names.
TOP_TOOLS = 10
TOP_TOOLS_PER_MODEL = 5
#: How a run without a model is listed.
NO_MODEL = "(none)"


def day_text(day: int) -> str:
    """A UTC day (days since 1970) as YYYY-MM-DD, through the viewer's one reading of
    stored times (a window's days always name a date: ``to`` is one)."""
    at = moment(day * DAY_MS)
    return at.date().isoformat() if at is not None else shown_time(day * DAY_MS)


def percentile(sorted_values: list[int], p: float) -> int | None:
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


async def overview_counts(
    reader: HistoryReader, activity: Activity, *, since: int, until: int
) -> tuple[Counts, str]:
    """The counts of ``[since, until)`` and how they were made ("index" or "scan")."""
    index = activity.statistics()
    if index is not None:
        return await index.counts(activity.tenant, since=since, until=until), "index"
    return await scan_counts(reader, since=since, until=until), "scan"


async def scan_counts(reader: HistoryReader, *, since: int, until: int) -> Counts:
    """The counts, by reading every run of the tenant and the events of those in range."""
    totals: dict[tuple[int, str | None], list[int]] = defaultdict(lambda: [0] * 6)
    counts = Counts()
    tools: Counter[tuple[int, str | None, str]] = Counter()
    failures: Counter[tuple[int, str | None, str]] = Counter()
    async for batch in reader.every_run():
        for run in batch:
            summary = summarize_run(run)
            started = summary.started_at if summary.started_at is not None else 0
            if not since <= started < until:
                continue
            day, model = started // DAY_MS, summary.model_id
            cell = totals[(day, model)]
            cell[0] += 1
            cell[1] += summary.status == FAILED
            for n, kind in enumerate(TOKEN_KINDS, start=2):
                cell[n] += (summary.tokens or {}).get(kind, 0)
            if summary.duration_ms is not None:
                counts.durations.append(Duration(day, model, summary.duration_ms))
            async for event in reader.all_events(run["runId"]):
                outcome = tool_outcome(event)
                if outcome is not None:
                    tools[(day, model, outcome[0])] += 1
                    failures[(day, model, outcome[0])] += outcome[1]
    counts.totals = [Totals(day, model, *cell) for (day, model), cell in totals.items()]
    counts.tools = [ToolCount(*key, n, failures[key]) for key, n in tools.items()]
    return counts


def _tokens(rows: Iterable[Totals]) -> dict[str, int]:
    sums = dict.fromkeys(TOKEN_KINDS, 0)
    for row in rows:
        for kind, value in zip(
            TOKEN_KINDS,
            (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens),
            strict=True,
        ):
            sums[kind] += value
    return sums


def _top(tools: Iterable[ToolCount], size: int) -> Document:
    calls: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for row in tools:
        calls[row.tool] += row.calls
        failed[row.tool] += row.failures

    def ranked(by: Counter[str]) -> list[Document]:
        order = sorted((tool for tool in by if by[tool]), key=lambda tool: (-by[tool], tool))
        return [{"tool": t, "calls": calls[t], "failures": failed[t]} for t in order[:size]]

    return {"byCalls": ranked(calls), "byFailures": ranked(failed)}


def _group(counts: Counts, ms: list[int], size: int) -> Document:
    """One group's figures; ``ms`` its durations, sorted."""
    return {
        "runs": sum(row.runs for row in counts.totals),
        "failed": sum(row.failed for row in counts.totals),
        "tokens": _tokens(counts.totals),
        "medianMs": percentile(ms, 50),
        "p95Ms": percentile(ms, 95),
        "tools": _top(counts.tools, size),
    }


#: The durations of each (day, model), sorted.
Cells = dict[tuple[int, str | None], list[int]]


def duration_cells(durations: Iterable[Duration]) -> Cells:
    """The durations put in their (day, model) cells in one pass, each cell sorted once:
    made once for every window of a page."""
    cells: Cells = defaultdict(list)
    for day, model, ms in durations:
        cells[(day, model)].append(ms)
    for values in cells.values():
        values.sort()
    return cells


def window(counts: Counts, *, today: int, days: int, cells: Cells | None = None) -> Document:
    """One window's overview: every day of it (newest first), every model, the whole.

    Each row of the counts is looked at once (grouped by day and by model in one
    pass): over 100,000 runs this is what the page's time goes to after the queries.
    A day's, a model's and the whole's durations are the sorted (day, model) cells
    joined (``cells``: :func:`duration_cells` of the counts' durations, if made).
    """
    first = today - days + 1
    by_day = {day: Counts() for day in range(first, today + 1)}
    by_model: dict[str | None, Counts] = defaultdict(Counts)
    whole = Counts()
    for totals in counts.totals:
        if first <= totals.day <= today:
            for group in (by_day[totals.day], by_model[totals.model], whole):
                group.totals.append(totals)
    every = duration_cells(counts.durations) if cells is None else cells
    cell_ms = {key: values for key, values in every.items() if first <= key[0] <= today}
    day_ms: dict[int, list[int]] = {day: [] for day in by_day}
    model_ms: dict[str | None, list[int]] = defaultdict(list)
    for (day, model), values in cell_ms.items():
        day_ms[day] += values
        model_ms[model] += values
    # Sorted runs joined: what timsort merges in one pass per run.
    whole_ms = sorted(chain.from_iterable(cell_ms.values()))
    for values in (*day_ms.values(), *model_ms.values()):
        values.sort()
    for tool in counts.tools:
        if first <= tool.day <= today:
            for group in (by_day[tool.day], by_model[tool.model], whole):
                group.tools.append(tool)
    models = sorted(by_model, key=lambda model: (model is None, model or ""))
    return {
        "days": days,
        "from": day_text(first),
        "to": day_text(today),
        "total": _group(whole, whole_ms, TOP_TOOLS),
        "byDay": [
            {"day": day_text(day), **_group(by_day[day], day_ms[day], 1)}
            for day in range(today, first - 1, -1)
        ],
        "byModel": [
            {
                "model": model if model is not None else NO_MODEL,
                **_group(by_model[model], model_ms[model], TOP_TOOLS_PER_MODEL),
            }
            for model in models
            if by_model[model].totals
        ],
    }
