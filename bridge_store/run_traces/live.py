"""``serve --export-runs``: each run, once it ends, sent to the collector as a trace.

Three steps, none of them on a CallStore call's path:

1. The runs substore is watched (:mod:`.watch`): a write that ends a run puts it in a
   memory queue of at most :data:`MAX_WAITING` runs and returns; the call waits for
   nothing more. A run that finds the queue full (the store has not taken runs for
   a long while) is dropped, counted ``queue_full`` and logged.
2. A writer moves the memory queue into the store's export queue
   (``features.ExportQueue`` on the runs' backend) in batches; what the store refuses
   waits in memory and is tried again, backing off.
3. The :class:`~.drain.Drainer` of the server holding the export lease sends the
   store's queue and unqueues what the collector took.

So a run whose end was stored is sent at least once, even across a collector outage
of any length and a restart, from the moment it is in the store's queue: within
:data:`WRITE_EVERY` of its end, and on a graceful stop, which writes the memory queue
out before the stores close (bounded by :data:`STOP_SECONDS`). Only a server killed
outright in that instant loses a run's export; ``bridge-store export-runs --since``
sends such runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from ..backend.features import ExportQueue, Leases, QueuedRun
from ..errors import Code, ConnectError
from ..stack.layers import StoreLayer
from ..stack.stores import Stores
from ..types import Document
from .counts import ExportCounts
from .drain import Drainer
from .mapping import SpanMaker, TraceSettings
from .sender import OtlpSender
from .settings import ExportSettings
from .watch import RunWatch

logger = logging.getLogger("bridge_store.run_export")

#: Runs held in memory at most, waiting for the store's queue to take them.
MAX_WAITING = 10_000
#: Seconds between two writes of the memory queue to the store (at most).
WRITE_EVERY = 0.5
#: Runs written to the store's queue per call.
WRITE_BATCH = 500
#: Longest wait between two tries of a store that refused runs.
WRITE_BACKOFF_MAX = 30.0
#: How long a stop may take to write the memory queue out.
STOP_SECONDS = 5.0
#: A store failing with these is out, not refusing what it was given: try again.
OUTAGES = frozenset({Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.RESOURCE_EXHAUSTED})


class LiveExport:
    """The live export of one server: its memory queue, writer and drainer."""

    def __init__(
        self,
        settings: ExportSettings,
        backend: ExportQueue,
        leases: Leases,
        counts: ExportCounts | None = None,
        *,
        trace_settings: TraceSettings | None = None,
    ) -> None:
        self.settings = settings
        self._backend = backend
        self.counts = counts if counts is not None else ExportCounts()
        self._waiting: deque[QueuedRun] = deque()
        self.counts.waiting_here = lambda: len(self._waiting)
        self._sender = OtlpSender(settings.endpoint)
        maker = SpanMaker(trace_settings or TraceSettings.from_environment())
        self.drainer = Drainer(settings, backend, leases, self._sender, maker, self.counts)
        self._written = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._full_logged = False

    def layer(self) -> StoreLayer:
        """The store layer that queues here the runs that end."""
        return RunWatch(self.ended)

    def ended(self, tenant: str, run: Document) -> None:
        """A run ended: queue it (no wait, no I/O)."""
        if len(self._waiting) >= MAX_WAITING:
            self.counts.dropped["queue_full"] += 1
            if not self._full_logged:
                self._full_logged = True
                logger.warning(
                    "run export: %d ended runs wait for the store's export queue; runs "
                    "ending now are not exported (send them later with export-runs)",
                    MAX_WAITING,
                )
            return
        entry = QueuedRun(int(time.time() * 1000), tenant, run["agentId"], run["runId"])
        self._waiting.append(entry)
        self._written.set()

    def start(self, stores: Stores) -> None:
        """Write and drain in the background; ``stores`` are read to make the traces."""
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._write_forever()),
            loop.create_task(self.drainer.run_forever(stores)),
        ]

    async def stop(self) -> None:
        """Stop sending, write what waits in memory to the store, free the lease."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._sender.close()
        try:
            async with asyncio.timeout(STOP_SECONDS):
                while self._waiting:
                    await self._write_some()
                await self.drainer.release()
        except (ConnectError, TimeoutError):
            logger.warning(
                "run export: %d ended runs could not be queued in the store before the "
                "server stopped (send them later with export-runs)",
                len(self._waiting),
            )

    async def _write_forever(self) -> None:
        backoff = 0.0
        while True:
            await self._written.wait()
            self._written.clear()
            try:
                while self._waiting:
                    await self._write_some()
            except ConnectError as error:
                backoff = min(WRITE_BACKOFF_MAX, backoff * 2 if backoff else 1.0)
                logger.warning(
                    "run export: the store did not take %d ended runs (%s); trying again in %.0f s",
                    len(self._waiting),
                    error.message,
                    backoff,
                )
                self._written.set()
                await asyncio.sleep(backoff)
                continue
            backoff = 0.0
            self._full_logged = False
            self.drainer.woken.set()
            await asyncio.sleep(WRITE_EVERY)

    async def _write_some(self) -> None:
        batch = [self._waiting[n] for n in range(min(WRITE_BATCH, len(self._waiting)))]
        try:
            await self._backend.queue_runs(batch)
        except ConnectError as error:
            if error.code in OUTAGES:
                raise
            # The store refuses these entries themselves (ids too long for its keys):
            # one by one, so one it cannot hold does not hold up the others.
            for entry in batch:
                try:
                    await self._backend.queue_runs([entry])
                except ConnectError as one:
                    if one.code in OUTAGES:
                        raise
                    self.counts.dropped["refused"] += 1
                    logger.warning(
                        "run export: the store cannot queue run %s of agent %s (tenant %s): %s",
                        entry.run_id,
                        entry.agent_id,
                        entry.tenant,
                        one.message,
                    )
                self._waiting.popleft()
            return
        for _ in batch:
            self._waiting.popleft()
