"""Agent activity as metrics: runs finished, their tokens and durations, tool calls.

Counted from what the bridge writes as it writes it, by thin wrappers around the runs
and run-events substores (:meth:`ActivityCounts.metered`):

- a run that a create or update leaves ``finished``, ``error``, ``cancelled`` or
  ``expired`` counts once (a bounded memory of the last :data:`REMEMBERED_RUNS` such
  runs keeps a later update of an ended run from counting it again): by status,
  model and tenant, with its usage's tokens by kind and its duration;
- an appended event that ends a tool call (:func:`~bridge_store.backend.statistics.
  tool_outcome`) counts once, by tool, status and tenant; an idempotent replay of a
  stored event does not count again.

The appends are the hot path: an event that ends no tool call (nearly all) costs the
wrapper one plain call and ``tool_outcome``'s few dict lookups, with no coroutine of
its own (the backend's is handed back as it is). As for the per-call metrics
(:mod:`.metrics`), the counts are plain dicts the event loop updates and a collector
turns into families when Prometheus scrapes.

Label values are bounded, per tenant and in all, so a client cannot grow the number of
series (tool names and model ids come from documents): each tenant keeps the first
:data:`LABEL_CAPS` models and tools it sees and reports every later one as ``other``,
and so does every tenant once :data:`SERIES_CAPS` values are kept across tenants. One
tenant's many models never turn another tenant's first one into ``other``. The first
``LABEL_CAPS["tenant"]`` tenants are kept by name, later ones together as
:data:`OTHER_TENANTS`, which no tenant can be named.

Each tenant's counts are apart, so its own series can be shown to it alone
(:meth:`ActivityCollector.collect_tenant`; see :class:`.metrics.MetricsEndpoint`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from ..backend.history import TOKEN_KINDS, summarize_run
from ..backend.statistics import label
from ..backend.substores import RunEventStore, RunStore
from ..stack.layers import StoreLayer
from ..types import Document
from .activity_stores import MeteredRunEvents, MeteredRuns

#: Past this many values of a label, further values are reported as this.
OTHER = "other"
#: The ``tenant`` of every tenant past the first ``LABEL_CAPS["tenant"]``: a leading
#: ``_`` starts no tenant name, so it is never one tenant's own series.
OTHER_TENANTS = "_other"
#: A run without a model, a tool without a name.
NONE = "none"
#: Tenants kept by name; models and tools kept by name per tenant.
LABEL_CAPS = {"tenant": 100, "model": 50, "tool": 100}
#: Models and tools kept by name across all tenants (each tenant's own ``other`` and
#: ``none`` come on top): with the tenants' cap, about 18,000 activity series at most.
SERIES_CAPS = {"model": 500, "tool": 1000}
#: Ended runs remembered so that a later update does not count them twice.
REMEMBERED_RUNS = 10_000
ENDED = frozenset({"finished", "error", "cancelled", "expired"})
#: 1 s (an offline turn) to 2 h (a long agent session).
RUN_DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
_BUCKET_LABELS = [*(repr(bound) for bound in RUN_DURATION_BUCKETS), "+Inf"]
_KIND_LABELS = dict(zip(TOKEN_KINDS, ("input", "output", "cache_read", "cache_write"), strict=True))


class Budget:
    """How many more label values may be kept by name, shared by every tenant's caps."""

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = size


class LabelCap:
    """One tenant's values of a label: the first ``cap`` seen while ``budget`` lasts,
    then :data:`OTHER`."""

    __slots__ = ("_budget", "_cap", "_seen")

    def __init__(self, cap: int, budget: Budget) -> None:
        self._cap = cap
        self._budget = budget
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return NONE
        if value in self._seen:
            return value
        if (
            len(self._seen) >= self._cap
            or self._budget.left <= 0
            or label(value) is None
            or len(value) > 64
        ):
            return OTHER
        self._seen.add(value)
        self._budget.left -= 1
        return value


class TenantActivity:
    """What one tenant's runs and tool calls counted (or every tenant past the cap's)."""

    __slots__ = ("durations", "model", "name", "runs", "tokens", "tool", "tool_calls")

    def __init__(self, name: str, models: Budget, tools: Budget) -> None:
        #: The ``tenant`` label: the tenant's name, or :data:`OTHER_TENANTS`.
        self.name = name
        self.model = LabelCap(LABEL_CAPS["model"], models)
        self.tool = LabelCap(LABEL_CAPS["tool"], tools)
        #: (tool, status) -> calls.
        self.tool_calls: dict[tuple[str, str], int] = {}
        #: (status, model) -> runs.
        self.runs: dict[tuple[str, str], int] = {}
        #: (kind, model) -> tokens.
        self.tokens: dict[tuple[str, str], int] = {}
        #: model -> runs per duration bucket (the last is +Inf), and the sum.
        self.durations: dict[str, tuple[list[int], list[float]]] = {}


class ActivityCounts(StoreLayer):
    """What the metered substores counted since the server started, tenant by tenant:
    a layer that counts the runs and run events through it."""

    def __init__(self) -> None:
        self._models = Budget(SERIES_CAPS["model"])
        self._tools = Budget(SERIES_CAPS["tool"])
        #: The tenants kept by name.
        self.tenants: dict[str, TenantActivity] = {}
        #: Every tenant past the first ``LABEL_CAPS["tenant"]``.
        self.others = TenantActivity(OTHER_TENANTS, self._models, self._tools)
        self._ended: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def runs(self, inner: RunStore) -> RunStore:
        return MeteredRuns(inner, self.run_written)

    def run_events(self, inner: RunEventStore) -> RunEventStore:
        return MeteredRunEvents(inner, self.tool_call)

    def of(self, tenant: str) -> TenantActivity:
        """The counts ``tenant``'s calls go to."""
        found = self.tenants.get(tenant)
        if found is not None:
            return found
        if len(self.tenants) >= LABEL_CAPS["tenant"]:
            return self.others
        found = self.tenants[tenant] = TenantActivity(tenant, self._models, self._tools)
        return found

    def tool_call(self, tenant: str, outcome: tuple[str, bool]) -> None:
        tool, failed = outcome
        counts = self.of(tenant)
        key = (counts.tool(tool), "error" if failed else "completed")
        counts.tool_calls[key] = counts.tool_calls.get(key, 0) + 1

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
        counts = self.of(tenant)
        model = counts.model(summary.model_id)
        key = (str(status), model)
        counts.runs[key] = counts.runs.get(key, 0) + 1
        for kind, count in (summary.tokens or {}).items():
            tokens = (_KIND_LABELS[kind], model)
            counts.tokens[tokens] = counts.tokens.get(tokens, 0) + max(count, 0)
        if summary.duration_ms is not None and summary.duration_ms >= 0:
            seconds = summary.duration_ms / 1000
            buckets, total = counts.durations.setdefault(
                model, ([0] * (len(RUN_DURATION_BUCKETS) + 1), [0.0])
            )
            buckets[bisect_left(RUN_DURATION_BUCKETS, seconds)] += 1
            total[0] += seconds


class ActivityCollector:
    """The activity families, built from :class:`ActivityCounts` at each scrape."""

    def __init__(self, counts: ActivityCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        """Every tenant's series (the operator's view)."""
        counts = self._counts
        return _families([*counts.tenants.values(), counts.others])

    def collect_tenant(self, tenant: str) -> Iterable[Metric]:
        """``tenant``'s series only: the same families, without another tenant's sample.

        A tenant past the cap, counted with the others, has none of its own to show.
        """
        found = self._counts.tenants.get(tenant)
        return _families([] if found is None else [found])


def _families(tenants: Iterable[TenantActivity]) -> list[Metric]:
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
    for counts in tenants:
        who = counts.name
        families: list[tuple[CounterMetricFamily, dict[tuple[str, str], int]]] = [
            (runs, counts.runs),
            (tokens, counts.tokens),
            (tools, counts.tool_calls),
        ]
        for family, values in families:
            for (first, second), value in list(values.items()):
                family.add_metric([first, second, who], value)
        for model, (buckets, total) in list(counts.durations.items()):
            cumulative, seen = [], 0
            for bound, count in zip(_BUCKET_LABELS, buckets, strict=True):
                seen += count
                cumulative.append((bound, float(seen)))
            durations.add_metric([model, who], cumulative, total[0])
    return [runs, tokens, tools, durations]
