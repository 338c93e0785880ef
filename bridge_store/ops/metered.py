"""A checkpoint substore that counts the blob bytes passing through it, for the metrics.

Wrapped around the checkpoint substore when metrics are on: blob bytes (the bytes, not
their base64) written and read. The counts are plain integers, bumped on the event
loop and read by the metrics collector when Prometheus scrapes (see :mod:`.metrics`).
Run events appended need no wrapper: they are the ``runEvents.append`` calls answered
``ok``, which the per-call metrics count anyway.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..stores import Stores
from ..substores import BlobRef, CheckpointStore


class StoreCounts:
    """What the metered substores counted since the server started."""

    __slots__ = ("checkpoint_bytes_read", "checkpoint_bytes_written")

    def __init__(self) -> None:
        self.checkpoint_bytes_written = 0
        self.checkpoint_bytes_read = 0

    def metered(self, stores: Stores) -> Stores:
        """``stores`` with checkpoint bytes counted here."""
        return dataclasses.replace(stores, checkpoints=MeteredCheckpoints(stores.checkpoints, self))


class MeteredCheckpoints:
    """A checkpoint store that counts the blob bytes written and read through it."""

    def __init__(self, inner: CheckpointStore, counts: StoreCounts) -> None:
        self._inner = inner
        self._counts = counts

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        blob = await self._inner.get(tenant, agent_id, blob_id)
        if blob is not None:
            self._counts.checkpoint_bytes_read += len(blob)
        return blob

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.create(tenant, agent_id, blob_id, data)
        self._counts.checkpoint_bytes_written += len(data)

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.update(tenant, agent_id, blob_id, data)
        self._counts.checkpoint_bytes_written += len(data)

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        await self._inner.delete(tenant, agent_ids, blob_ids)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        return await self._inner.list(
            tenant, agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )

    async def tenants(self) -> Sequence[str]:
        return await self._inner.tenants()
