"""The runs substore, watched for runs that end (``serve --export-runs``).

A create or update that leaves a run ``finished``, ``error``, ``cancelled`` or
``expired`` tells ``ended(tenant, run)`` after the backend stored it; every other
method passes through (:mod:`bridge_store.stack.layers`). ``ended`` only
puts the run in a memory queue, so the call that ended the run waits for nothing more.
"""

from __future__ import annotations

from collections.abc import Callable

from ..backend.substores import RunStore
from ..stack.layers import RunsLayer, StoreLayer
from ..types import Document

#: The statuses a run ends with.
ENDED = frozenset({"finished", "error", "cancelled", "expired"})


class WatchedRuns(RunsLayer):
    def __init__(self, inner: RunStore, ended: Callable[[str, Document], None]) -> None:
        super().__init__(inner)
        self._ended = ended

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        stored = await self.inner.create(tenant, run, creator)
        if run.get("status") in ENDED:
            self._ended(tenant, run)
        return stored

    async def update(self, tenant: str, run: Document) -> Document:
        stored = await self.inner.update(tenant, run)
        if run.get("status") in ENDED:
            self._ended(tenant, run)
        return stored


class RunWatch(StoreLayer):
    """The layer that tells ``ended(tenant, run)`` of each run that ends."""

    def __init__(self, ended: Callable[[str, Document], None]) -> None:
        self.ended = ended

    def runs(self, inner: RunStore) -> RunStore:
        return WatchedRuns(inner, self.ended)
