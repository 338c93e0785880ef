"""The runs and run-events substores, counted for the activity metrics (:mod:`.activity`).

Every method hands back the wrapped substore's own coroutine, unawaited, except where
something is counted after the call: a run's create and update (rare), and the append
of an event that ends a tool call. So the hot calls (appends of other events, lists,
gets) cost one plain function call more, and no coroutine frame of their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

from ..statistics import tool_outcome
from ..substores import RunEventStore, RunPosition, RunStore
from ..types import Document

Pending = Coroutine[Any, Any, Any]


class MeteredRuns:
    """Runs; ``written(tenant, run)`` is told of each run created or updated."""

    def __init__(self, inner: RunStore, written: Callable[[str, Document], None]) -> None:
        self._inner = inner
        self._written = written

    def get(self, tenant: str, agent_id: str, run_id: str) -> Pending:
        return self._inner.get(tenant, agent_id, run_id)

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        stored = await self._inner.create(tenant, run, creator)
        self._written(tenant, run)
        return stored

    async def update(self, tenant: str, run: Document) -> Document:
        stored = await self._inner.update(tenant, run)
        self._written(tenant, run)
        return stored

    def creators(self, tenant: str, runs: Sequence[tuple[str, str]]) -> Pending:
        return self._inner.creators(tenant, runs)

    def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> Pending:
        return self._inner.delete(tenant, agent_ids, run_ids)

    def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> Pending:
        return self._inner.list(
            tenant, agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
        )

    def tenants(self) -> Pending:
        return self._inner.tenants()


class MeteredRunEvents:
    """Run events; ``ended(tenant, (tool, failed))`` is told of each tool call that ends."""

    def __init__(
        self, inner: RunEventStore, ended: Callable[[str, tuple[str, bool]], None]
    ) -> None:
        self._inner = inner
        self._ended = ended

    def append(self, tenant: str, event: Document) -> Pending:
        outcome = tool_outcome(event)
        if outcome is None:
            return self._inner.append(tenant, event)
        return self._append_counted(tenant, event, outcome)

    async def _append_counted(
        self, tenant: str, event: Document, outcome: tuple[str, bool]
    ) -> Document:
        stored = await self._inner.append(tenant, event)
        # A replay of a stored event (same idempotency key) hands back that event,
        # with its own time: it was counted when it was stored.
        if event["idempotencyKey"] is None or stored.get("createdAt") == event["createdAt"]:
            self._ended(tenant, outcome)
        return stored

    def list(self, tenant: str, run_id: str, *, after_seq: int, limit: int) -> Pending:
        return self._inner.list(tenant, run_id, after_seq=after_seq, limit=limit)

    def delete(self, tenant: str, run_ids: Sequence[str] | None) -> Pending:
        return self._inner.delete(tenant, run_ids)

    def tenants(self) -> Pending:
        return self._inner.tenants()

    def run_ids(self, tenant: str) -> AsyncIterator[Sequence[str]]:
        return self._inner.run_ids(tenant)

    def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> Pending:
        return self._inner.restore(tenant, run_id, events)
