"""The runs and run-events substores, counted for the activity metrics (:mod:`.activity`).

What is counted is counted after the call: a run's create and update (rare), and the
append of an event that ends a tool call. Every other call passes through
(:mod:`bridge_store.stack.layers`), so the hot calls (appends of other events, lists, gets)
cost one plain function call more, and no coroutine frame of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..backend.statistics import tool_outcome
from ..backend.substores import RunEventStore, RunStore
from ..stack.layers import RunEventsLayer, RunsLayer
from ..types import Document


class MeteredRuns(RunsLayer):
    """Runs; ``written(tenant, run)`` is told of each run created or updated."""

    def __init__(self, inner: RunStore, written: Callable[[str, Document], None]) -> None:
        super().__init__(inner)
        self._written = written

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        stored = await self.inner.create(tenant, run, creator)
        self._written(tenant, run)
        return stored

    async def update(self, tenant: str, run: Document) -> Document:
        stored = await self.inner.update(tenant, run)
        self._written(tenant, run)
        return stored


class MeteredRunEvents(RunEventsLayer):
    """Run events; ``ended(tenant, (tool, failed))`` is told of each tool call that ends."""

    def __init__(
        self, inner: RunEventStore, ended: Callable[[str, tuple[str, bool]], None]
    ) -> None:
        super().__init__(inner)
        self._ended = ended

    def append(self, tenant: str, event: Document) -> Coroutine[Any, Any, Document]:
        outcome = tool_outcome(event)
        if outcome is None:
            return self.inner.append(tenant, event)
        return self._append_counted(tenant, event, outcome)

    async def _append_counted(
        self, tenant: str, event: Document, outcome: tuple[str, bool]
    ) -> Document:
        stored = await self.inner.append(tenant, event)
        # A replay of a stored event (same idempotency key) hands back that event,
        # with its own time: it was counted when it was stored.
        if event["idempotencyKey"] is None or stored.get("createdAt") == event["createdAt"]:
            self._ended(tenant, outcome)
        return stored
