"""The export queue (``features.ExportQueue``): one empty object per run waiting.

``<prefix>export-queue/<time>/<tenant>/<agent id>/<run id>``, the time as
:func:`~.keys.ordered_int` and the names as :func:`~.keys.hex_id`, so S3's ascending
listing is the queue's order: oldest first, then tenant, agent and run. Queuing a run
again writes a second object at its new time, and unqueuing deletes exactly the
objects taken, so a run queued again after it was taken stays queued; the exporter
sends a run listed twice once. Every tenant's runs share the one directory, beside
the leases, outside every tenant's keys.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge_store.backend.features import QueuedRun

from ._bucket import Bucket
from .keys import Layout, checked, hex_id, ordered_int, unhex_id

QUEUE_DIR = "export-queue/"
_INT_OFFSET = 2**53


class S3ExportQueue:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._prefix = layout.prefix + QUEUE_DIR

    def key(self, run: QueuedRun) -> str:
        names = (hex_id(run.tenant), hex_id(run.agent_id), hex_id(run.run_id))
        return checked(self._prefix + "/".join((ordered_int(run.queued_ms), *names)))

    def queued_run(self, key: str) -> QueuedRun:
        at, tenant, agent_id, run_id = key[len(self._prefix) :].split("/")
        return QueuedRun(
            int(at) - _INT_OFFSET, unhex_id(tenant), unhex_id(agent_id), unhex_id(run_id)
        )

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        for run in runs:
            await self._bucket.put(self.key(run), b"")

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        if limit < 1:
            return []
        page, _ = await self._bucket.list_page(self._prefix, max_keys=limit)
        return [self.queued_run(item.key) for item in page]

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        await self._bucket.delete(self.key(run) for run in runs)

    async def queued_count(self) -> int:
        return sum([1 async for _ in self._bucket.iter_keys(self._prefix)])
