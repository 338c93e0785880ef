"""Store layers: what a server puts between its calls and the backends, composed.

A layer (sealing secrets, counting for the metrics, watching runs end) changes a few
methods of one or two substores. :class:`StoreLayer` is the one type of layer: it
wraps the substores it changes and hands the others on untouched, and the wrappers
it builds subclass the pass-through substores here (:class:`AgentsLayer`,
:class:`RunsLayer`, :class:`RunEventsLayer`, :class:`CheckpointsLayer`), writing only
the methods they change. A :class:`~bridge_store.stack.stores.StoreStack` applies its list
of layers in order, bottom first, like Starlette's middleware.

Every pass-through method hands back the inner substore's own coroutine, unawaited:
a layer costs a call it does not change one plain function call, and no coroutine
frame of its own. Each wrapper keeps what it wraps as ``inner``, so what lies beneath
the layers (a backend's own substore and the optional features it implements, see
:mod:`bridge_store.backend.features`) is found by :func:`beneath`, with no second view of the
stores to keep.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar, cast

from ..backend.substores import (
    AgentPosition,
    AgentStore,
    BlobRef,
    CheckpointStore,
    RunEventStore,
    RunPosition,
    RunStore,
)
from ..types import Document

S = TypeVar("S")


class AgentsLayer:
    """An agents substore over ``inner`` that passes every call on; subclass it and
    write the methods the layer changes."""

    def __init__(self, inner: AgentStore) -> None:
        self.inner = inner

    def get(self, tenant: str, agent_id: str) -> Coroutine[Any, Any, Document | None]:
        return self.inner.get(tenant, agent_id)

    def create(
        self, tenant: str, agent: Document, creator: str | None = None
    ) -> Coroutine[Any, Any, Document]:
        return self.inner.create(tenant, agent, creator)

    def creators(
        self, tenant: str, agent_ids: Sequence[str]
    ) -> Coroutine[Any, Any, dict[str, str]]:
        return self.inner.creators(tenant, agent_ids)

    def update(self, tenant: str, agent: Document) -> Coroutine[Any, Any, Document]:
        return self.inner.update(tenant, agent)

    def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None
    ) -> Coroutine[Any, Any, None]:
        return self.inner.delete(tenant, agent_ids, cwd)

    def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> Coroutine[Any, Any, builtins.list[Document]]:
        return self.inner.list(tenant, cwd=cwd, after=after, limit=limit)

    def tenants(self) -> Coroutine[Any, Any, Sequence[str]]:
        return self.inner.tenants()


class RunsLayer:
    """A runs substore over ``inner`` that passes every call on; subclass it and write
    the methods the layer changes."""

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner

    def get(self, tenant: str, agent_id: str, run_id: str) -> Coroutine[Any, Any, Document | None]:
        return self.inner.get(tenant, agent_id, run_id)

    def create(
        self, tenant: str, run: Document, creator: str | None = None
    ) -> Coroutine[Any, Any, Document]:
        return self.inner.create(tenant, run, creator)

    def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> Coroutine[Any, Any, dict[tuple[str, str], str]]:
        return self.inner.creators(tenant, runs)

    def update(self, tenant: str, run: Document) -> Coroutine[Any, Any, Document]:
        return self.inner.update(tenant, run)

    def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> Coroutine[Any, Any, None]:
        return self.inner.delete(tenant, agent_ids, run_ids)

    def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> Coroutine[Any, Any, builtins.list[Document]]:
        return self.inner.list(
            tenant, agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
        )

    def tenants(self) -> Coroutine[Any, Any, Sequence[str]]:
        return self.inner.tenants()


class RunEventsLayer:
    """A run-events substore over ``inner`` that passes every call on; subclass it and
    write the methods the layer changes."""

    def __init__(self, inner: RunEventStore) -> None:
        self.inner = inner

    def append(self, tenant: str, event: Document) -> Coroutine[Any, Any, Document]:
        return self.inner.append(tenant, event)

    def list(
        self, tenant: str, run_id: str, *, after_seq: int, limit: int
    ) -> Coroutine[Any, Any, builtins.list[Document]]:
        return self.inner.list(tenant, run_id, after_seq=after_seq, limit=limit)

    def delete(self, tenant: str, run_ids: Sequence[str] | None) -> Coroutine[Any, Any, None]:
        return self.inner.delete(tenant, run_ids)

    def tenants(self) -> Coroutine[Any, Any, Sequence[str]]:
        return self.inner.tenants()

    def run_ids(self, tenant: str) -> AsyncIterator[Sequence[str]]:
        return self.inner.run_ids(tenant)

    def restore(
        self, tenant: str, run_id: str, events: Sequence[Document]
    ) -> Coroutine[Any, Any, int]:
        return self.inner.restore(tenant, run_id, events)


class CheckpointsLayer:
    """A checkpoints substore over ``inner`` that passes every call on; subclass it and
    write the methods the layer changes."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner

    def get(self, tenant: str, agent_id: str, blob_id: str) -> Coroutine[Any, Any, bytes | None]:
        return self.inner.get(tenant, agent_id, blob_id)

    def create(
        self, tenant: str, agent_id: str, blob_id: str, data: bytes
    ) -> Coroutine[Any, Any, None]:
        return self.inner.create(tenant, agent_id, blob_id, data)

    def update(
        self, tenant: str, agent_id: str, blob_id: str, data: bytes
    ) -> Coroutine[Any, Any, None]:
        return self.inner.update(tenant, agent_id, blob_id, data)

    def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> Coroutine[Any, Any, None]:
        return self.inner.delete(tenant, agent_ids, blob_ids)

    def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> Coroutine[Any, Any, builtins.list[BlobRef]]:
        return self.inner.list(
            tenant, agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )

    def tenants(self) -> Coroutine[Any, Any, Sequence[str]]:
        return self.inner.tenants()


#: The pass-through substores: what every layer's wrapper is.
SUBSTORE_LAYERS = (AgentsLayer, RunsLayer, RunEventsLayer, CheckpointsLayer)


def beneath(substore: S) -> S:
    """The substore beneath every layer wrapped around ``substore``: the backend's own,
    where its optional features (:mod:`bridge_store.backend.features`) are."""
    found: object = substore
    while isinstance(found, SUBSTORE_LAYERS):
        found = found.inner
    # Each wrapper's inner serves the same substore as the wrapper.
    return cast(S, found)


class StoreLayer:
    """One layer of a store stack: it wraps the substores it changes and hands the rest
    on as they are. A layer overrides only the substores it changes, each with a
    subclass of that substore's pass-through (:class:`AgentsLayer` ...)."""

    def agents(self, inner: AgentStore) -> AgentStore:
        return inner

    def runs(self, inner: RunStore) -> RunStore:
        return inner

    def run_events(self, inner: RunEventStore) -> RunEventStore:
        return inner

    def checkpoints(self, inner: CheckpointStore) -> CheckpointStore:
        return inner
