"""agents on S3: one JSON object per agent, two sorted indexes (all agents, per cwd)."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence

from bridge_store.backend.substores import AgentPosition, agent_position
from bridge_store.types import Document

from ._bucket import Bucket, Listed
from ._index import IndexedDocs, IndexScan, Version
from .keys import PAST_REVS, Layout, checked, last_segment, undescending_hex_id


def _position(position: AgentPosition) -> str:
    return Layout.agent_position(position.updated_at, position.agent_id)


class TenantAgents:
    """One tenant's agents: everything under its layout's prefix."""

    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._layout = layout
        self._docs = IndexedDocs(
            bucket, kind="agent", key_of=self._key_of, entries_of=self._entries_of
        )
        self._scan: IndexScan[Version] = IndexScan(bucket, "agent")

    def _key_of(self, agent: Document) -> str:
        return self._layout.agent_doc(agent["agentId"])

    def _entries_of(self, agent: Document, rev: str) -> list[str]:
        # "<position>~<rev>": the position ends in "~", so every rev of one agent at
        # one updatedAt sits together and PAST_REVS skips all of them.
        position = _position(agent_position(agent))
        return [
            checked(self._layout.agents_order() + position + rev),
            checked(self._layout.agents_of_cwd(agent["cwd"]) + position + rev),
        ]

    async def get(self, agent_id: str) -> Document | None:
        version = await self._docs.read(self._layout.agent_doc(agent_id))
        return version.doc if version is not None else None

    async def create(self, agent: Document, creator: str | None) -> Document:
        await self._docs.create(agent, f"agent {agent['agentId']}", creator)
        return agent

    async def creators(self, agent_ids: Sequence[str]) -> dict[str, str]:
        names = await self._docs.creators([self._layout.agent_doc(a) for a in agent_ids])
        return {a: name for a, name in zip(agent_ids, names, strict=True) if name is not None}

    async def update(self, agent: Document) -> Document:
        await self._docs.replace(agent, f"agent {agent['agentId']}")
        return agent

    async def delete(self, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        if agent_ids is not None:
            found = await asyncio.gather(
                *(self._docs.read(self._layout.agent_doc(agent_id)) for agent_id in agent_ids)
            )
            doomed = [v for v in found if v is not None and (cwd is None or v.doc["cwd"] == cwd)]
            await self._docs.remove(doomed)
        elif cwd is not None:
            while batch := await self._list_versions(cwd=cwd, after=None, limit=1000):
                await self._docs.remove(batch)
        else:
            keys = [key async for key in self._bucket.iter_keys(self._layout.agents_docs())]
            found = await asyncio.gather(*(self._docs.read(key) for key in keys))
            await self._docs.remove([v for v in found if v is not None])

    async def list(
        self, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        return [v.doc for v in await self._list_versions(cwd=cwd, after=after, limit=limit)]

    async def _list_versions(
        self, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> builtins.list[Version]:
        prefix = self._layout.agents_order() if cwd is None else self._layout.agents_of_cwd(cwd)
        start_after = None if after is None else prefix + _position(after) + PAST_REVS

        async def resolve(entry: Listed) -> Version | None:
            position, rev = last_segment(entry.key).rsplit("~", 1)
            version = await self._docs.read(self._layout.agent_doc(undescending_hex_id(position)))
            return version if version is not None and version.rev == rev else None

        return await self._scan.take(prefix, start_after=start_after, want=limit, resolve=resolve)
