"""The runs substore, watched for runs that end (``serve --export-runs``).

A create or update that leaves a run ``finished``, ``error``, ``cancelled`` or
``expired`` tells ``ended(tenant, run)`` after the backend stored it; every other
method hands back the wrapped substore's own coroutine, unawaited. ``ended`` only
puts the run in a memory queue, so the call that ended the run waits for nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from ..substores import RunPosition, RunStore
from ..types import Document

Pending = Coroutine[Any, Any, Any]
#: The statuses a run ends with.
ENDED = frozenset({"finished", "error", "cancelled", "expired"})


class WatchedRuns:
    def __init__(self, inner: RunStore, ended: Callable[[str, Document], None]) -> None:
        self._inner = inner
        self._ended = ended

    def get(self, tenant: str, agent_id: str, run_id: str) -> Pending:
        return self._inner.get(tenant, agent_id, run_id)

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        stored = await self._inner.create(tenant, run, creator)
        if run.get("status") in ENDED:
            self._ended(tenant, run)
        return stored

    async def update(self, tenant: str, run: Document) -> Document:
        stored = await self._inner.update(tenant, run)
        if run.get("status") in ENDED:
            self._ended(tenant, run)
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
