"""Dict-backed substores, the reference backend.

Each tenant has a state of its own (:mod:`bridge_store_memory.state`: plain
synchronous classes whose methods never await, so each is atomic on the loop); the
substores here pick the caller's tenant's state and delegate, so no code path can
reach across tenants.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Generic, TypeVar

from bridge_store.backend.features import QueuedRun
from bridge_store.backend.substores import (
    AgentPosition,
    BlobRef,
    RunPosition,
)
from bridge_store.types import Document

from .state import Agents, Checkpoints, RunEvents, Runs

T = TypeVar("T")
#: Run ids per page of ``run_ids``.
RUN_ID_PAGE = 1000


class _Tenants(Generic[T]):
    """One substore state per tenant: tenants share nothing, not even an index."""

    def __init__(self, new: Callable[[], T]) -> None:
        self._new = new
        self._states: dict[str, T] = {}

    def of(self, tenant: str) -> T:
        state = self._states.get(tenant)
        if state is None:
            state = self._states[tenant] = self._new()
        return state

    def names(self) -> list[str]:
        return list(self._states)


class MemoryAgents:
    def __init__(self) -> None:
        self._tenants = _Tenants(Agents)

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        return self._tenants.of(tenant).get(agent_id)

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        return self._tenants.of(tenant).create(agent, creator)

    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        known = self._tenants.of(tenant).creators
        return {agent_id: known[agent_id] for agent_id in agent_ids if agent_id in known}

    async def update(self, tenant: str, agent: Document) -> Document:
        return self._tenants.of(tenant).update(agent)

    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        self._tenants.of(tenant).delete(agent_ids, cwd)

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        return self._tenants.of(tenant).list(cwd=cwd, after=after, limit=limit)

    async def tenants(self) -> builtins.list[str]:
        return [name for name in self._tenants.names() if self._tenants.of(name).rows]


class MemoryRuns:
    def __init__(self) -> None:
        self._tenants = _Tenants(Runs)

    async def get(self, tenant: str, agent_id: str, run_id: str) -> Document | None:
        return self._tenants.of(tenant).get(agent_id, run_id)

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        return self._tenants.of(tenant).create(run, creator)

    async def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        known = self._tenants.of(tenant).creators
        return {key: known[key] for key in runs if key in known}

    async def update(self, tenant: str, run: Document) -> Document:
        return self._tenants.of(tenant).update(run)

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> None:
        self._tenants.of(tenant).delete(agent_ids, run_ids)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        return self._tenants.of(tenant).list(
            agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
        )

    async def tenants(self) -> builtins.list[str]:
        return [name for name in self._tenants.names() if len(self._tenants.of(name))]


class MemoryRunEvents:
    def __init__(self) -> None:
        self._tenants = _Tenants(RunEvents)

    async def append(self, tenant: str, event: Document) -> Document:
        return self._tenants.of(tenant).append(event)

    async def list(self, tenant: str, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        return self._tenants.of(tenant).list(run_id, after_seq=after_seq, limit=limit)

    async def delete(self, tenant: str, run_ids: Sequence[str] | None) -> None:
        self._tenants.of(tenant).delete(run_ids)

    async def tenants(self) -> builtins.list[str]:
        return [name for name in self._tenants.names() if self._tenants.of(name).run_ids()]

    async def run_ids(self, tenant: str) -> AsyncIterator[builtins.list[str]]:
        run_ids = self._tenants.of(tenant).run_ids()
        for start in range(0, len(run_ids), RUN_ID_PAGE):
            yield run_ids[start : start + RUN_ID_PAGE]

    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        return self._tenants.of(tenant).restore(run_id, events)


class MemoryCheckpoints:
    def __init__(self) -> None:
        self._tenants = _Tenants(Checkpoints)

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        return self._tenants.of(tenant).get(agent_id, blob_id)

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        self._tenants.of(tenant).create(agent_id, blob_id, data)

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        self._tenants.of(tenant).update(agent_id, blob_id, data)

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        self._tenants.of(tenant).delete(agent_ids, blob_ids)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        return self._tenants.of(tenant).list(
            agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )

    async def tenants(self) -> builtins.list[str]:
        return [name for name in self._tenants.names() if self._tenants.of(name).blobs]


class MemoryBackend:
    def __init__(self) -> None:
        self.agents = MemoryAgents()
        self.runs = MemoryRuns()
        self.run_events = MemoryRunEvents()
        self.checkpoints = MemoryCheckpoints()
        #: Lease name -> (holder, monotonic time it expires at).
        self._leases: dict[str, tuple[str, float]] = {}
        #: Runs waiting to be exported: (tenant, agent id, run id) -> queued at (ms).
        self._export_queue: dict[tuple[str, str, str], int] = {}

    async def start(self, *, migrate: bool) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    async def upgrade_schema(self) -> None:
        """No schema."""

    async def schema_revision(self) -> str | None:
        return None

    async def readiness(self) -> str | None:
        """Always ready: the data is in this process."""
        return None

    def pool_stats(self) -> None:
        """No connections."""

    async def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        now = time.monotonic()
        current = self._leases.get(name)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[name] = (holder, now + seconds)
        return True

    async def release_lease(self, name: str, holder: str) -> None:
        current = self._leases.get(name)
        if current is not None and current[0] == holder:
            del self._leases[name]

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        for run in runs:
            self._export_queue[(run.tenant, run.agent_id, run.run_id)] = run.queued_ms

    async def queued_runs(self, limit: int) -> builtins.list[QueuedRun]:
        queued = (QueuedRun(at, *key) for key, at in self._export_queue.items())
        return sorted(queued)[:limit]

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        for run in runs:
            key = (run.tenant, run.agent_id, run.run_id)
            if self._export_queue.get(key) == run.queued_ms:
                del self._export_queue[key]

    async def queued_count(self) -> int:
        return len(self._export_queue)
