"""The store layer that counts the checkpoint bytes passing through it, for the metrics.

In the stack when metrics are on: blob bytes (the bytes, not their base64) written and
read. The counts are plain integers, bumped on the event loop and read by the metrics
collector when Prometheus scrapes (see :mod:`.metrics`). Run events appended need no
counting here: they are the ``runEvents.append`` calls answered ``ok``, which the
per-call metrics count anyway.
"""

from __future__ import annotations

from ..backend.substores import CheckpointStore
from ..stack.layers import CheckpointsLayer, StoreLayer


class StoreCounts(StoreLayer):
    """What the metered substores counted since the server started: a layer that
    counts the checkpoint bytes through it."""

    def __init__(self) -> None:
        self.checkpoint_bytes_written = 0
        self.checkpoint_bytes_read = 0

    def checkpoints(self, inner: CheckpointStore) -> CheckpointStore:
        return MeteredCheckpoints(inner, self)


class MeteredCheckpoints(CheckpointsLayer):
    """A checkpoint store that counts the blob bytes written and read through it."""

    def __init__(self, inner: CheckpointStore, counts: StoreCounts) -> None:
        super().__init__(inner)
        self._counts = counts

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        blob = await self.inner.get(tenant, agent_id, blob_id)
        if blob is not None:
            self._counts.checkpoint_bytes_read += len(blob)
        return blob

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self.inner.create(tenant, agent_id, blob_id, data)
        self._counts.checkpoint_bytes_written += len(data)

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self.inner.update(tenant, agent_id, blob_id, data)
        self._counts.checkpoint_bytes_written += len(data)
