"""Prometheus metrics: one registry per app, children bound before the first call.

Everything goes through ``prometheus_client`` (its registry, metric types and
exposition); nothing here formats the text format by hand. ``create_app`` builds one
:class:`Metrics` (so tests and several apps in one process never share a series), and
``GET /metrics`` serves its registry.

The per-call cost is what the hot path pays, so every ``(substore, method)`` pair of
the method table gets its children bound once, here: recording a call is a dict
lookup, a counter, a histogram and two byte counters, with no label dict built per
call. Labels only ever take values from that table (anything else is
``unknown``), so a client cannot grow the number of series.

Backends are labelled by URL scheme and by the substores they serve (``substore`` is
``agents,runs`` for a backend serving both), never by URL: URLs carry hosts and
passwords. What a backend reports (its pool, its availability) is read when Prometheus
scrapes, not on every call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    make_asgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from .connect import bearer_matches
from .stores import Stores
from .substores import BlobRef, CheckpointStore, PoolStats, RunEventStore
from .types import Document

#: The label value of a substore or method outside the method table, and of requests
#: refused before their body named one (bad token, unknown content type, too large).
UNKNOWN = "unknown"
#: The ``code`` label of a call answered without an error (Connect has no such code).
OK = "ok"

#: 0.1 ms (a memory-backend get) to 10 s (a 100 MiB checkpoint to a slow bucket),
#: about three buckets per decade.
DURATION_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class MethodMetrics:
    """The children of one ``(substore, method)`` pair, bound once."""

    __slots__ = ("_codes", "_family", "duration", "labels", "request_bytes", "response_bytes")

    def __init__(self, metrics: Metrics, substore: str, method: str) -> None:
        self.labels = (substore, method)
        self._family = metrics.calls
        self.duration = metrics.call_duration.labels(substore, method)
        self.request_bytes = metrics.request_bytes.labels(substore, method)
        self.response_bytes = metrics.response_bytes.labels(substore, method)
        # "ok" is bound up front so every method's series exists from the start (rates
        # over a series that appears late miss its first increments); an error code's
        # series appears with its first occurrence.
        self._codes = {OK: metrics.calls.labels(substore, method, OK)}

    def record(self, code: str, seconds: float, request_bytes: int, response_bytes: int) -> None:
        counter = self._codes.get(code)
        if counter is None:
            counter = self._codes[code] = self._family.labels(*self.labels, code)
        counter.inc()
        self.duration.observe(seconds)
        self.request_bytes.inc(request_bytes)
        self.response_bytes.inc(response_bytes)


@dataclass(frozen=True, slots=True)
class BackendView:
    """What the metrics show of one backend: its labels, and where its figures come from.

    ``pool`` reads the backend's connection pool (None when it has none);
    ``availability`` reads whether it is up and its errors by kind so far (None until
    something tracks them).
    """

    scheme: str
    substores: str
    pool: Callable[[], PoolStats | None]
    availability: Callable[[], tuple[bool, Mapping[str, int]]] | None = None


class BackendCollector:
    """Per-backend figures, read from the backends when Prometheus scrapes."""

    def __init__(self) -> None:
        self.backends: list[BackendView] = []

    def collect(self) -> Iterable[Metric]:
        labels = ["scheme", "substore"]
        up = GaugeMetricFamily(
            "bridge_store_backend_up",
            "1 while the backend answers, 0 during an outage",
            labels=labels,
        )
        errors = CounterMetricFamily(
            "bridge_store_backend_errors",
            "Calls the backend failed, by kind of failure",
            labels=[*labels, "kind"],
        )
        size = GaugeMetricFamily(
            "bridge_store_pool_size", "Connections the backend's pool may hold", labels=labels
        )
        in_use = GaugeMetricFamily(
            "bridge_store_pool_in_use", "Pooled connections checked out now", labels=labels
        )
        waits = CounterMetricFamily(
            "bridge_store_pool_waits",
            "Checkouts that found every pooled connection in use and waited",
            labels=labels,
        )
        for view in self.backends:
            names = [view.scheme, view.substores]
            if view.availability is not None:
                available, failures = view.availability()
                up.add_metric(names, 1.0 if available else 0.0)
                for kind, count in sorted(failures.items()):
                    errors.add_metric([*names, kind], count)
            stats = view.pool()
            if stats is not None:
                size.add_metric(names, stats.size)
                in_use.add_metric(names, stats.in_use)
                if stats.waits is not None:
                    waits.add_metric(names, stats.waits)
        return [up, errors, size, in_use, waits]


class Metrics:
    """Every metric of one app, in its own registry."""

    def __init__(self, methods: Mapping[str, Iterable[str]]) -> None:
        """``methods``: the method table, substore -> method names (labels come from it)."""
        self.registry = CollectorRegistry(auto_describe=True)
        # The library's default collectors (process, platform, GC), built again for this
        # registry rather than shared through its global one.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        labels = ("substore", "method")
        self.calls = Counter(
            "bridge_store_calls",
            "CallStore calls answered, by Connect code (ok: no error)",
            [*labels, "code"],
            registry=self.registry,
        )
        self.call_duration = Histogram(
            "bridge_store_call_duration_seconds",
            "Time from a CallStore request's headers to its answer",
            labels,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.request_bytes = Counter(
            "bridge_store_request_bytes",
            "CallStore request bodies as received (compressed if they were)",
            labels,
            registry=self.registry,
        )
        self.response_bytes = Counter(
            "bridge_store_response_bytes",
            "CallStore response bodies as sent (compressed if they were)",
            labels,
            registry=self.registry,
        )
        #: Calls being answered now; a plain int the hot path bumps, read at scrape.
        self.in_flight = 0
        Gauge(
            "bridge_store_calls_in_flight",
            "CallStore calls being answered now",
            registry=self.registry,
        ).set_function(lambda: self.in_flight)
        self.run_events_appended = Counter(
            "bridge_store_run_events_appended",
            "Run events acknowledged by runEvents.append (idempotent replays included)",
            registry=self.registry,
        )
        self.checkpoint_bytes_written = Counter(
            "bridge_store_checkpoint_bytes_written",
            "Checkpoint blob bytes stored by checkpoints.create and update",
            registry=self.registry,
        )
        self.checkpoint_bytes_read = Counter(
            "bridge_store_checkpoint_bytes_read",
            "Checkpoint blob bytes returned by checkpoints.get",
            registry=self.registry,
        )
        self.backends = BackendCollector()
        self.registry.register(self.backends)
        self._methods: dict[tuple[str, str], MethodMetrics] = {
            (substore, method): MethodMetrics(self, substore, method)
            for substore, names in methods.items()
            for method in names
        }
        self.unknown = MethodMetrics(self, UNKNOWN, UNKNOWN)

    def method(self, substore: str, method: str) -> MethodMetrics:
        """The children of a call's labels (already ``unknown`` outside the table)."""
        return self._methods.get((substore, method), self.unknown)

    def add_backend(self, view: BackendView) -> None:
        """Show ``view``'s figures from the next scrape on."""
        self.backends.backends.append(view)

    def metered(self, stores: Stores) -> Stores:
        """``stores`` with run-event appends and checkpoint bytes counted."""
        return dataclasses.replace(
            stores,
            run_events=MeteredRunEvents(stores.run_events, self.run_events_appended),
            checkpoints=MeteredCheckpoints(
                stores.checkpoints, self.checkpoint_bytes_written, self.checkpoint_bytes_read
            ),
        )


class MeteredRunEvents:
    """A run-event store that counts the appends it acknowledges."""

    def __init__(self, inner: RunEventStore, appended: Counter) -> None:
        self._inner = inner
        self._appended = appended

    async def append(self, event: Document) -> Document:
        stored = await self._inner.append(event)
        self._appended.inc()
        return stored

    async def list(self, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        return await self._inner.list(run_id, after_seq=after_seq, limit=limit)

    async def delete(self, run_ids: Sequence[str] | None) -> None:
        await self._inner.delete(run_ids)


class MeteredCheckpoints:
    """A checkpoint store that counts the blob bytes written and read through it."""

    def __init__(self, inner: CheckpointStore, written: Counter, read: Counter) -> None:
        self._inner = inner
        self._written = written
        self._read = read

    async def get(self, agent_id: str, blob_id: str) -> bytes | None:
        blob = await self._inner.get(agent_id, blob_id)
        if blob is not None:
            self._read.inc(len(blob))
        return blob

    async def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.create(agent_id, blob_id, data)
        self._written.inc(len(data))

    async def update(self, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.update(agent_id, blob_id, data)
        self._written.inc(len(data))

    async def delete(self, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None) -> None:
        await self._inner.delete(agent_ids, blob_ids)

    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        return await self._inner.list(
            agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )


class MetricsEndpoint:
    """``GET /metrics``: the library's ASGI exposition app, behind the bearer token.

    ``token`` None serves without auth (``--metrics-public``).
    """

    def __init__(self, registry: CollectorRegistry, token: str | None) -> None:
        self._exposition = make_asgi_app(registry)
        self._token = token.encode("utf-8") if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._token is not None:
            header = Headers(scope=scope).get("authorization")
            if not bearer_matches(header, self._token):
                response = PlainTextResponse(
                    "missing or invalid bearer token\n",
                    status_code=401,
                    headers={"www-authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self._exposition(scope, receive, send)
