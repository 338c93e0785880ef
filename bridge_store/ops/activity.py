"""Agent activity as metrics: runs finished, their tokens and durations, tool calls.

Counted from what the bridge writes as it writes it, by thin wrappers around the runs
and run-events substores (:meth:`ActivityCounts.metered`):

- a run that a create or update leaves ``finished``, ``error``, ``cancelled`` or
  ``expired`` counts once (a bounded memory of the last :data:`REMEMBERED_RUNS` such
  runs keeps a later update of an ended run from counting it again): by status,
  model and tenant, with its usage's tokens by kind and its duration;
- an appended event that ends a tool call (:func:`~bridge_store.statistics.
  tool_outcome`) counts once, by tool, status and tenant; an idempotent replay of a
  stored event does not count again.

The appends are the hot path: an event that ends no tool call (nearly all) costs the
wrapper one plain call and ``tool_outcome``'s few dict lookups, with no coroutine of
its own (the backend's is handed back as it is). As for the per-call metrics
(:mod:`.metrics`), the counts are plain dicts the event loop updates and a collector
turns into families when Prometheus scrapes.

Label values are bounded: each label keeps the first :data:`LABEL_CAPS` values it
sees and reports every later one as ``other``, so a client cannot grow the number of
series (tool names and model ids come from documents).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from ..history import TOKEN_KINDS, summarize_run
from ..statistics import label
from ..stores import Stores
from ..types import Document
from .activity_stores import MeteredRunEvents, MeteredRuns

#: Past this many values of a label, further values are reported as this.
OTHER = "other"
#: A run without a model, a tool without a name.
NONE = "none"
LABEL_CAPS = {"tenant": 100, "model": 50, "tool": 100}
#: Ended runs remembered so that a later update does not count them twice.
REMEMBERED_RUNS = 10_000
ENDED = frozenset({"finished", "error", "cancelled", "expired"})
#: 1 s (an offline turn) to 2 h (a long agent session).
RUN_DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
_BUCKET_LABELS = [*(repr(bound) for bound in RUN_DURATION_BUCKETS), "+Inf"]
_KIND_LABELS = dict(zip(TOKEN_KINDS, ("input", "output", "cache_read", "cache_write"), strict=True))


class LabelCap:
    """One label's values: the first ``cap`` seen, then :data:`OTHER`."""

    __slots__ = ("_cap", "_seen")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return NONE
        if value in self._seen:
            return value
        if len(self._seen) >= self._cap or label(value) is None or len(value) > 64:
            return OTHER
        self._seen.add(value)
        return value


class ActivityCounts:
    """What the metered substores counted since the server started."""

    def __init__(self) -> None:
        self.tenant = LabelCap(LABEL_CAPS["tenant"])
        self.model = LabelCap(LABEL_CAPS["model"])
        self.tool = LabelCap(LABEL_CAPS["tool"])
        self.tool_calls: dict[tuple[str, str, str], int] = {}
        self.runs: dict[tuple[str, str, str], int] = {}
        self.tokens: dict[tuple[str, str, str], int] = {}
        #: (model, tenant) -> runs per duration bucket (the last is +Inf), and the sum.
        self.durations: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
        self._ended: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def metered(self, stores: Stores) -> Stores:
        """``stores`` with runs and run events counted here."""
        return dataclasses.replace(
            stores,
            runs=MeteredRuns(stores.runs, self.run_written),
            run_events=MeteredRunEvents(stores.run_events, self.tool_call),
        )

    def tool_call(self, tenant: str, outcome: tuple[str, bool]) -> None:
        tool, failed = outcome
        key = (self.tool(tool), "error" if failed else "completed", self.tenant(tenant))
        self.tool_calls[key] = self.tool_calls.get(key, 0) + 1

    def run_written(self, tenant: str, run: Document) -> None:
        """A run was created or updated: count it if this ended it."""
        status = run.get("status")
        if status not in ENDED:
            return
        ref = (tenant, run["agentId"], run["runId"])
        if ref in self._ended:
            return
        self._ended[ref] = None
        if len(self._ended) > REMEMBERED_RUNS:
            self._ended.popitem(last=False)
        summary = summarize_run(run)
        model, who = self.model(summary.model_id), self.tenant(tenant)
        key = (str(status), model, who)
        self.runs[key] = self.runs.get(key, 0) + 1
        for kind, count in (summary.tokens or {}).items():
            tokens = (_KIND_LABELS[kind], model, who)
            self.tokens[tokens] = self.tokens.get(tokens, 0) + max(count, 0)
        if summary.duration_ms is not None and summary.duration_ms >= 0:
            seconds = summary.duration_ms / 1000
            buckets, total = self.durations.setdefault(
                (model, who), ([0] * (len(RUN_DURATION_BUCKETS) + 1), [0.0])
            )
            buckets[bisect_left(RUN_DURATION_BUCKETS, seconds)] += 1
            total[0] += seconds


class ActivityCollector:
    """The activity families, built from :class:`ActivityCounts` at each scrape."""

    def __init__(self, counts: ActivityCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        counts = self._counts
        runs = CounterMetricFamily(
            "bridge_store_runs_finished",
            "Runs that ended (finished, error, cancelled, expired), by status, model, tenant",
            labels=["status", "model", "tenant"],
        )
        tokens = CounterMetricFamily(
            "bridge_store_run_tokens",
            "Tokens of the usage of runs that ended, by kind, model and tenant",
            labels=["kind", "model", "tenant"],
        )
        tools = CounterMetricFamily(
            "bridge_store_tool_calls",
            "Tool calls that ended (completed or error), by tool, status and tenant",
            labels=["tool", "status", "tenant"],
        )
        durations = HistogramMetricFamily(
            "bridge_store_run_duration_seconds",
            "Duration of runs that ended (startedAt to endedAt), by model and tenant",
            labels=["model", "tenant"],
        )
        families: list[tuple[CounterMetricFamily, dict[Any, int]]] = [
            (runs, counts.runs),
            (tokens, counts.tokens),
            (tools, counts.tool_calls),
        ]
        for family, values in families:
            for labels, value in list(values.items()):
                family.add_metric(list(labels), value)
        for (model, tenant), (buckets, total) in list(counts.durations.items()):
            cumulative, seen = [], 0
            for bound, count in zip(_BUCKET_LABELS, buckets, strict=True):
                seen += count
                cumulative.append((bound, float(seen)))
            durations.add_metric([model, tenant], cumulative, total[0])
        return [runs, tokens, tools, durations]
