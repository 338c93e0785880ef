"""Substores that seal secrets before the backend stores them, and open them on return.

:func:`seal_stores` wraps the agents and checkpoints substores of any backend: an
agent's ``sdkMetadata`` and every checkpoint blob reach the backend sealed
(:mod:`bridge_store.security.encryption`), runs and run events pass through. Backends need
know nothing about it, so every backend, built-in or plugin, stores ciphertext.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
from collections.abc import Callable, Sequence

from ..stores import Stores
from ..substores import AgentPosition, AgentStore, BlobRef, CheckpointStore
from ..types import Document
from ..wire.large_bodies import off_the_loop
from .encryption import Identity, Keyring
from .large_seals import LARGE_BLOB_BYTES

METADATA = "sdkMetadata"


def seal_agent(keyring: Keyring, tenant: str, agent: Document) -> Document:
    """``agent`` with its sdkMetadata sealed (a copy: the caller's stays as given)."""
    if METADATA not in agent:
        return agent
    identity = Identity(tenant, agent["agentId"])
    return {**agent, METADATA: keyring.seal_metadata(agent[METADATA], identity)}


def open_agent(keyring: Keyring, tenant: str, agent: Document) -> Document:
    if METADATA in agent:
        agent[METADATA] = keyring.open_metadata(agent[METADATA], Identity(tenant, agent["agentId"]))
    return agent


class SealedAgents:
    def __init__(self, inner: AgentStore, keyring: Keyring) -> None:
        self._inner = inner
        self._keyring = keyring

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        agent = await self._inner.get(tenant, agent_id)
        return None if agent is None else open_agent(self._keyring, tenant, agent)

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        await self._inner.create(tenant, seal_agent(self._keyring, tenant, agent), creator)
        return agent

    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        return await self._inner.creators(tenant, agent_ids)

    async def update(self, tenant: str, agent: Document) -> Document:
        await self._inner.update(tenant, seal_agent(self._keyring, tenant, agent))
        return agent

    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        await self._inner.delete(tenant, agent_ids, cwd)

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> builtins.list[Document]:
        agents = await self._inner.list(tenant, cwd=cwd, after=after, limit=limit)
        return [open_agent(self._keyring, tenant, agent) for agent in agents]

    async def tenants(self) -> Sequence[str]:
        return await self._inner.tenants()


class SealedCheckpoints:
    def __init__(self, inner: CheckpointStore, keyring: Keyring) -> None:
        self._inner = inner
        self._keyring = keyring

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        stored = await self._inner.get(tenant, agent_id, blob_id)
        if stored is None:
            return None
        identity = Identity(tenant, agent_id, blob_id)
        if len(stored) > LARGE_BLOB_BYTES:
            return await off_the_loop(self._keyring.open_blob, stored, identity)
        return self._keyring.open_blob(stored, identity)

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.create(
            tenant, agent_id, blob_id, await self._sealed(data, tenant, agent_id, blob_id)
        )

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self._inner.update(
            tenant, agent_id, blob_id, await self._sealed(data, tenant, agent_id, blob_id)
        )

    async def _sealed(self, data: bytes, tenant: str, agent_id: str, blob_id: str) -> bytes:
        """``data`` sealed; a large blob on the large bodies' worker, in pieces, so the
        loop keeps answering while a 75 MB checkpoint is encrypted."""
        identity = Identity(tenant, agent_id, blob_id)
        if len(data) > LARGE_BLOB_BYTES:
            return await off_the_loop(self._keyring.seal_blob, data, identity)
        return self._keyring.seal_blob(data, identity)

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
    ) -> builtins.list[BlobRef]:
        return await self._inner.list(
            tenant, agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit
        )

    async def tenants(self) -> Sequence[str]:
        return await self._inner.tenants()


def seal_stores(stores: Stores, keyring: Keyring | None) -> Stores:
    """``stores`` with secrets sealed by ``keyring``; unchanged without one."""
    if keyring is None:
        return stores
    return dataclasses.replace(
        stores,
        agents=SealedAgents(stores.agents, keyring),
        checkpoints=SealedCheckpoints(stores.checkpoints, keyring),
    )


def sealing(keyring: Keyring | None) -> Callable[[Stores], Stores] | None:
    """The wrapper a :class:`~bridge_store.stores.StoreStack` seals with; None without
    a keyring (nothing to seal)."""
    if keyring is None:
        return None
    return functools.partial(seal_stores, keyring=keyring)
