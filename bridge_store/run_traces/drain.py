"""The sending half of ``serve --export-runs``: one server takes the store's queue of
ended runs, sends them and unqueues what the collector took.

Each server runs a :class:`Drainer`; the one holding the lease :data:`LEASE_NAME` (on
the runs' backend, as ``--retain`` holds its own) works, the others only try the
lease now and then, so a fleet, or ``serve --workers N``, sends each run once. A
holder that dies frees the lease when it runs out, and another server carries on
from the queue, which is in the store.

A round takes the oldest runs queued at least ``settle_seconds`` ago, reads each (a
run deleted meanwhile is dropped, counted ``gone``), sends their spans in one request
and unqueues them once the collector took them. A request the collector does not
take leaves them queued: the next round comes after a backoff that doubles from the
first to the longest wait of the settings. A run the collector refuses (a span it
cannot accept) would hold the queue forever, so after a failed request each run is
sent alone, and for each the collector does not take, an empty request follows: taken,
the collector is up and refuses that run; not taken, it is an outage, so back off. A
run refused :data:`MAX_REFUSALS` times is dropped, counted ``rejected``, and logged by
its ids; a collector that refuses everything (a wrong path, a bad token) drops
nothing.

So the guarantee is at least once: a run is unqueued only after the collector took
it, and one taken but not unqueued (the server died in between) is sent again, with
the same ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from opentelemetry.sdk.trace import ReadableSpan

from ..backend.features import ExportQueue, Leases, QueuedRun
from ..errors import ConnectError
from ..lifecycle.retain import lease_holder
from ..stack.stores import Stores
from .counts import ExportCounts
from .mapping import SpanMaker
from .reading import read_run
from .sender import OtlpSender
from .settings import ExportSettings

logger = logging.getLogger("bridge_store.run_export")

LEASE_NAME = "run-export"
#: Runs taken from the queue per round (one request, unless it fails).
ROUND_RUNS = 64
#: Refusals, each while the collector took an empty request, before a run is dropped.
MAX_REFUSALS = 3
#: Seconds between two counts of the store's queue (a count may list a bucket).
COUNT_EVERY = 15.0

RunKey = tuple[str, str, str]


class Drainer:
    """One server's part in sending the queue."""

    def __init__(
        self,
        settings: ExportSettings,
        backend: ExportQueue,
        leases: Leases,
        sender: OtlpSender,
        maker: SpanMaker,
        counts: ExportCounts,
    ) -> None:
        self.settings = settings
        self._queue = backend
        self._leases = leases
        self._sender = sender
        self._maker = maker
        self.counts = counts
        self.holder = lease_holder()
        self._held_since: float | None = None
        self._backoff = 0.0
        self._refusals: dict[RunKey, int] = {}
        self._counted = 0.0
        self._failing = False
        #: Set when runs were queued here: a round may be due before the poll.
        self.woken = asyncio.Event()

    async def run_forever(self, stores: Stores) -> None:
        while True:
            try:
                delay = await self.round(stores)
            except ConnectError as error:
                logger.warning("run export: the store did not answer (%s)", error.message)
                delay = self._next_backoff()
            except Exception:
                logger.exception("run export round failed")  # a bug: said, and go on
                delay = self._next_backoff()
            self.woken.clear()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.woken.wait(), delay)

    async def release(self) -> None:
        if self._held_since is not None:
            self._held_since = None
            await self._leases.release_lease(LEASE_NAME, self.holder)

    async def round(self, stores: Stores) -> float:
        """One round; the seconds to wait before the next."""
        settings = self.settings
        if not await self._hold_lease():
            self.counts.waiting_in_store = None
            return settings.lease_seconds / 4
        taken = await self._queue.queued_runs(ROUND_RUNS)
        await self._count(len(taken))
        now_ms = int(time.time() * 1000)
        if not taken:
            self.counts.lag_seconds = 0.0
            return settings.poll_seconds
        self.counts.lag_seconds = max(0.0, (now_ms - taken[0].queued_ms) / 1000)
        settled_ms = now_ms - int(settings.settle_seconds * 1000)
        ready = [entry for entry in taken if entry.queued_ms <= settled_ms]
        if not ready:
            return max(0.05, (taken[0].queued_ms - settled_ms) / 1000)
        if not await self._send_round(stores, ready):
            return self._next_backoff()
        return 0.0 if len(taken) == ROUND_RUNS else settings.poll_seconds

    async def _send_round(self, stores: Stores, ready: list[QueuedRun]) -> bool:
        """Send ``ready``; whether the collector took them (or what it would take)."""
        by_run: dict[RunKey, list[QueuedRun]] = {}
        for entry in ready:  # a run queued twice (S3 keeps both) is sent once
            by_run.setdefault((entry.tenant, entry.agent_id, entry.run_id), []).append(entry)
        spans_of: dict[RunKey, list[ReadableSpan]] = {}
        gone: list[QueuedRun] = []
        for key, entries in by_run.items():
            record = await read_run(stores, *key)
            if record is None:
                gone += entries
                self.counts.dropped["gone"] += 1
                continue
            try:
                spans_of[key] = self._maker.spans(record)
            except Exception:
                # A bug: said with its trace, and the run does not hold up the queue.
                logger.exception("run export: run %s of agent %s has no trace", key[2], key[1])
                gone += entries
                self.counts.dropped["failed"] += 1
        if gone:
            await self._queue.unqueue_runs(gone)
        if not spans_of:
            return True
        if await self._sender.send([span for spans in spans_of.values() for span in spans]):
            await self._taken([e for key in spans_of for e in by_run[key]], len(spans_of))
            return True
        self.counts.retries += 1
        return await self._one_by_one(spans_of, by_run)

    async def _one_by_one(
        self, spans_of: dict[RunKey, list[ReadableSpan]], by_run: dict[RunKey, list[QueuedRun]]
    ) -> bool:
        """After a failed request: each run alone (unless it was alone), and for each
        the collector does not take, an empty request to tell a refusal of that run
        (the empty one is taken) from an outage (it is not: stop, back off)."""
        alone = len(spans_of) == 1
        for key, spans in spans_of.items():
            if not await self._hold_lease():
                return False  # another server carries on
            if not alone:
                if await self._sender.send(spans):
                    await self._taken(by_run[key], 1)
                    continue
                self.counts.retries += 1
            if not await self._sender.send([]):
                return self._failed(len(spans_of))
            await self._refused(key, by_run[key])
        return True

    async def _refused(self, key: RunKey, entries: list[QueuedRun]) -> None:
        refusals = self._refusals[key] = self._refusals.get(key, 0) + 1
        if refusals < MAX_REFUSALS:
            return
        del self._refusals[key]
        tenant, agent_id, run_id = key
        logger.warning(
            "run export: the collector at %s refused run %s of agent %s (tenant %s) %d "
            "times while it took other requests; it is dropped",
            self.settings.shown,
            run_id,
            agent_id,
            tenant,
            refusals,
        )
        self.counts.dropped["rejected"] += 1
        await self._queue.unqueue_runs(entries)

    async def _taken(self, entries: list[QueuedRun], runs: int) -> None:
        await self._queue.unqueue_runs(entries)
        self.counts.exported += runs
        for entry in entries:
            self._refusals.pop((entry.tenant, entry.agent_id, entry.run_id), None)
        if self._failing:
            logger.info("run export: the collector at %s takes runs again", self.settings.shown)
        self._failing = False
        self._backoff = 0.0

    def _failed(self, runs: int) -> bool:
        if not self._failing:
            logger.warning(
                "run export: the collector at %s did not take %d runs; they stay queued "
                "and are tried again, waiting longer each time (up to %.0f s)",
                self.settings.shown,
                runs,
                self.settings.backoff_seconds[1],
            )
        self._failing = True
        return False

    def _next_backoff(self) -> float:
        first, longest = self.settings.backoff_seconds
        self._backoff = min(longest, self._backoff * 2 if self._backoff else first)
        return self._backoff * random.uniform(0.9, 1.1)

    async def _hold_lease(self) -> bool:
        """Take the lease, or renew it once a third of it has gone; whether held."""
        seconds = self.settings.lease_seconds
        now = time.monotonic()
        if self._held_since is not None and now - self._held_since < seconds / 3:
            return True
        held = await self._leases.acquire_lease(LEASE_NAME, self.holder, seconds)
        if held and self._held_since is None:
            logger.info("run export: this server sends the runs (%s)", self.settings.shown)
        self._held_since = now if held else None
        return held

    async def _count(self, taken: int) -> None:
        if taken < ROUND_RUNS:
            self.counts.waiting_in_store = taken
            return
        if time.monotonic() - self._counted >= COUNT_EVERY:
            self._counted = time.monotonic()
            self.counts.waiting_in_store = await self._queue.queued_count()
