"""The S3 substores: each tenant's items under a layout of its own.

Every call picks the caller's tenant's substore (``agents.TenantAgents`` ...), which
only ever builds keys under that tenant's prefix (``keys.Layout.of_tenant``), so no
listing, filter or delete can reach another tenant's objects.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Generic, TypeVar

from bridge_store.backend.substores import AgentPosition, BlobRef, RunPosition
from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.types import Document

from ._bucket import Bucket
from .agents import TenantAgents
from .checkpoints import TenantCheckpoints
from .events import TenantRunEvents
from .keys import Layout, tenant_of_segment, unhex_id
from .runs import TenantRuns

T = TypeVar("T")
#: Run ids per page of ``run_ids``.
RUN_ID_PAGE = 1000


class _PerTenant(Generic[T]):
    def __init__(self, bucket: Bucket, layout: Layout, new: Callable[[Bucket, Layout], T]):
        self._bucket = bucket
        self._layout = layout
        self._new = new
        self._made: dict[str, T] = {}

    def of(self, tenant: str) -> T:
        made = self._made.get(tenant)
        if made is None:
            made = self._made[tenant] = self._new(self._bucket, self._layout.of_tenant(tenant))
        return made

    async def holding(self, first_key: Callable[[Layout], str]) -> builtins.list[str]:
        """The tenants with at least one key under ``first_key(their layout)``."""
        found = []
        segments = await self._bucket.child_names(self._layout.tenants_dir())
        candidates = [DEFAULT_TENANT, *filter(None, map(tenant_of_segment, segments))]
        for tenant in candidates:
            page, _ = await self._bucket.list_page(
                first_key(self._layout.of_tenant(tenant)), max_keys=1
            )
            if page:
                found.append(tenant)
        return found


class S3Agents:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._tenants = _PerTenant(bucket, layout, TenantAgents)

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        return await self._tenants.of(tenant).get(agent_id)

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        return await self._tenants.of(tenant).create(agent, creator)

    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        return await self._tenants.of(tenant).creators(agent_ids)

    async def update(self, tenant: str, agent: Document) -> Document:
        return await self._tenants.of(tenant).update(agent)

    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        await self._tenants.of(tenant).delete(agent_ids, cwd)

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> builtins.list[Document]:
        return await self._tenants.of(tenant).list(cwd=cwd, after=after, limit=limit)

    async def tenants(self) -> builtins.list[str]:
        return await self._tenants.holding(Layout.agents_docs)


class S3Runs:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._tenants = _PerTenant(bucket, layout, TenantRuns)

    async def get(self, tenant: str, agent_id: str, run_id: str) -> Document | None:
        return await self._tenants.of(tenant).get(agent_id, run_id)

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        return await self._tenants.of(tenant).create(run, creator)

    async def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        return await self._tenants.of(tenant).creators(runs)

    async def update(self, tenant: str, run: Document) -> Document:
        return await self._tenants.of(tenant).update(run)

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> None:
        await self._tenants.of(tenant).delete(agent_ids, run_ids)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> builtins.list[Document]:
        return await self._tenants.of(tenant).list(
            agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
        )

    async def tenants(self) -> builtins.list[str]:
        return await self._tenants.holding(Layout.runs_docs)


class S3RunEvents:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._tenants = _PerTenant(bucket, layout, TenantRunEvents)
        self._bucket = bucket
        self._layout = layout

    async def tenants(self) -> builtins.list[str]:
        return await self._tenants.holding(Layout.all_events)

    async def run_ids(self, tenant: str) -> AsyncIterator[builtins.list[str]]:
        # One "directory" per run with a log under events/: one delimited listing.
        logs = self._layout.of_tenant(tenant).all_events()
        run_ids = [unhex_id(name) for name in await self._bucket.child_names(logs)]
        for start in range(0, len(run_ids), RUN_ID_PAGE):
            yield run_ids[start : start + RUN_ID_PAGE]

    async def append(self, tenant: str, event: Document) -> Document:
        return await self._tenants.of(tenant).append(event)

    async def list(
        self, tenant: str, run_id: str, *, after_seq: int, limit: int
    ) -> builtins.list[Document]:
        return await self._tenants.of(tenant).list(run_id, after_seq=after_seq, limit=limit)

    async def delete(self, tenant: str, run_ids: Sequence[str] | None) -> None:
        await self._tenants.of(tenant).delete(run_ids)

    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        return await self._tenants.of(tenant).restore(run_id, events)


class S3Checkpoints:
    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._tenants = _PerTenant(bucket, layout, TenantCheckpoints)

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        return await self._tenants.of(tenant).get(agent_id, blob_id)

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._tenants.of(tenant).create(agent_id, blob_id, data)

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._tenants.of(tenant).update(agent_id, blob_id, data)

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        await self._tenants.of(tenant).delete(agent_ids, blob_ids)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> builtins.list[BlobRef]:
        return await self._tenants.of(tenant).list(
            agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )

    async def tenants(self) -> builtins.list[str]:
        return await self._tenants.holding(Layout.blobs)
