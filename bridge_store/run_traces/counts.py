"""``serve --export-runs`` in the metrics: runs sent, dropped, retried, waiting, and lag.

The exporter keeps plain numbers (:class:`ExportCounts`) on the event loop; the
collector turns them into the library's families when Prometheus scrapes, as the
other series of :mod:`bridge_store.ops.metrics` do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

#: Why a run was not sent: this server's memory queue was full (the store did not
#: take runs for long), the store refused to queue it (ids too long for its keys),
#: the run was gone when its turn came (deleted, pruned), its trace could not be
#: made (a bug, logged with its trace), or the collector refused it repeatedly while
#: it took other requests.
DROP_REASONS = ("queue_full", "refused", "gone", "failed", "rejected")


class ExportCounts:
    """What the live export did so far, and where it stands."""

    def __init__(self) -> None:
        self.exported = 0
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.retries = 0
        #: Runs ended here and not yet written to the store's queue (read at scrape).
        self.waiting_here: Callable[[], int] = lambda: 0
        #: Runs in the store's queue, as this server last counted them; None unless
        #: this server holds the export lease.
        self.waiting_in_store: int | None = None
        #: Seconds since the oldest run in the store's queue ended (0: none waits).
        self.lag_seconds = 0.0


class ExportCollector:
    def __init__(self, counts: ExportCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        counts = self._counts
        exported = CounterMetricFamily(
            "bridge_store_runs_exported",
            "Runs the collector took (serve --export-runs), sent by this server",
            counts.exported,
        )
        dropped = CounterMetricFamily(
            "bridge_store_run_exports_dropped",
            "Runs never sent, by reason: queue_full, refused, gone, failed, rejected",
            labels=["reason"],
        )
        for reason, count in counts.dropped.items():
            dropped.add_metric([reason], count)
        retries = CounterMetricFamily(
            "bridge_store_run_export_retries",
            "Export requests the collector did not take, tried again after a backoff",
            counts.retries,
        )
        depth = GaugeMetricFamily(
            "bridge_store_run_export_queue_depth",
            "Runs waiting to be sent: in this server's memory, and in the store's queue "
            "(counted by the server holding the export lease)",
            labels=["queue"],
        )
        depth.add_metric(["memory"], counts.waiting_here())
        if counts.waiting_in_store is not None:
            depth.add_metric(["store"], counts.waiting_in_store)
        lag = GaugeMetricFamily(
            "bridge_store_run_export_lag_seconds",
            "How long the oldest run waiting in the store's queue has waited (0: none)",
            counts.lag_seconds,
        )
        return [exported, dropped, retries, depth, lag]
