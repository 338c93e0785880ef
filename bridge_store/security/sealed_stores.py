"""The store layer that seals secrets before the backend stores them, and opens them
on return.

:class:`Sealing` wraps the agents and checkpoints substores of any backend: an
agent's ``sdkMetadata`` and every checkpoint blob reach the backend sealed
(:mod:`bridge_store.security.encryption`); runs and run events pass through, as do
the methods that carry no secret. Backends need know nothing about it, so every
backend, built-in or plugin, stores ciphertext.
"""

from __future__ import annotations

import builtins

from ..backend.substores import AgentPosition, AgentStore, CheckpointStore
from ..stack.layers import AgentsLayer, CheckpointsLayer, StoreLayer
from ..stack.stores import Stores
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


class SealedAgents(AgentsLayer):
    def __init__(self, inner: AgentStore, keyring: Keyring) -> None:
        super().__init__(inner)
        self._keyring = keyring

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        agent = await self.inner.get(tenant, agent_id)
        return None if agent is None else open_agent(self._keyring, tenant, agent)

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        await self.inner.create(tenant, seal_agent(self._keyring, tenant, agent), creator)
        return agent

    async def update(self, tenant: str, agent: Document) -> Document:
        await self.inner.update(tenant, seal_agent(self._keyring, tenant, agent))
        return agent

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> builtins.list[Document]:
        agents = await self.inner.list(tenant, cwd=cwd, after=after, limit=limit)
        return [open_agent(self._keyring, tenant, agent) for agent in agents]


class SealedCheckpoints(CheckpointsLayer):
    def __init__(self, inner: CheckpointStore, keyring: Keyring) -> None:
        super().__init__(inner)
        self._keyring = keyring

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        stored = await self.inner.get(tenant, agent_id, blob_id)
        if stored is None:
            return None
        identity = Identity(tenant, agent_id, blob_id)
        if len(stored) > LARGE_BLOB_BYTES:
            return await off_the_loop(self._keyring.open_blob, stored, identity)
        return self._keyring.open_blob(stored, identity)

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self.inner.create(
            tenant, agent_id, blob_id, await self._sealed(data, tenant, agent_id, blob_id)
        )

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        await self.inner.update(
            tenant, agent_id, blob_id, await self._sealed(data, tenant, agent_id, blob_id)
        )

    async def _sealed(self, data: bytes, tenant: str, agent_id: str, blob_id: str) -> bytes:
        """``data`` sealed; a large blob on the large bodies' worker, in pieces, so the
        loop keeps answering while a 75 MB checkpoint is encrypted."""
        identity = Identity(tenant, agent_id, blob_id)
        if len(data) > LARGE_BLOB_BYTES:
            return await off_the_loop(self._keyring.seal_blob, data, identity)
        return self._keyring.seal_blob(data, identity)


class Sealing(StoreLayer):
    """The layer that seals secrets with ``keyring``: closest to the backends, so every
    other layer sees them in the clear."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring

    def agents(self, inner: AgentStore) -> AgentStore:
        return SealedAgents(inner, self.keyring)

    def checkpoints(self, inner: CheckpointStore) -> CheckpointStore:
        return SealedCheckpoints(inner, self.keyring)


def sealing(keyring: Keyring | None) -> list[StoreLayer]:
    """The layers a store stack seals with: :class:`Sealing`, or none without a keyring
    (nothing to seal)."""
    return [] if keyring is None else [Sealing(keyring)]


def seal_stores(stores: Stores, keyring: Keyring | None) -> Stores:
    """``stores`` with secrets sealed by ``keyring``; unchanged without one."""
    return stores.layered(sealing(keyring))
