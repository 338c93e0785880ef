"""runs on S3: one JSON object per (runId, agentId), sorted indexes (all runs, per agent).

Documents are keyed run id first, so the runs of one id (``runIds`` filters) are one
prefix listing of documents, with no index to check.
"""

from __future__ import annotations

import asyncio
import builtins
import heapq
from collections.abc import Sequence

from bridge_store.backend.substores import RunPosition, run_position
from bridge_store.types import Document

from ._bucket import Bucket, Listed
from ._index import IndexedDocs, IndexScan, Version
from .keys import Layout, checked, hex_id, last_segment, ordered_int, unhex_id

#: Sorts above every rev (hex) and every hex id after a "/".
_PAST = "~"


def _order(position: RunPosition) -> tuple[int, str, str]:
    return (position.turn_number, position.run_id, position.agent_id)


def _doc_order(version: Version) -> tuple[int, str, str]:
    return _order(run_position(version.doc))


class TenantRuns:
    """One tenant's runs: everything under its layout's prefix."""

    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._layout = layout
        self._docs = IndexedDocs(
            bucket, kind="run", key_of=self._key_of, entries_of=self._entries_of
        )
        self._scan: IndexScan[Version] = IndexScan(bucket, "run")

    def _key_of(self, run: Document) -> str:
        return self._layout.run_doc(run["agentId"], run["runId"])

    def _entries_of(self, run: Document, rev: str) -> list[str]:
        turn, run_id, agent_id = ordered_int(run["turnNumber"]), run["runId"], run["agentId"]
        order = f"{turn}/{hex_id(run_id)}/{hex_id(agent_id)}/{rev}"
        of_agent = f"{turn}/{hex_id(run_id)}/{rev}"
        return [
            checked(self._layout.runs_order() + order),
            checked(self._layout.runs_of_agent(agent_id) + of_agent),
        ]

    async def get(self, agent_id: str, run_id: str) -> Document | None:
        version = await self._docs.read(self._layout.run_doc(agent_id, run_id))
        return version.doc if version is not None else None

    async def create(self, run: Document, creator: str | None) -> Document:
        await self._docs.create(run, f"run {run['runId']} of agent {run['agentId']}", creator)
        return run

    async def creators(self, runs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        names = await self._docs.creators([self._layout.run_doc(a, r) for a, r in runs])
        return {key: name for key, name in zip(runs, names, strict=True) if name is not None}

    async def update(self, run: Document) -> Document:
        await self._docs.replace(run, f"run {run['runId']} of agent {run['agentId']}")
        return run

    async def delete(self, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None) -> None:
        if run_ids is not None:
            doomed = await self._of_run_ids(run_ids, agent_ids)
            await self._docs.remove(doomed)
        elif agent_ids is not None:
            for agent_id in agent_ids:
                while batch := await self._of_agent(agent_id, after=None, limit=1000):
                    await self._docs.remove(batch)
        else:
            keys = [key async for key in self._bucket.iter_keys(self._layout.runs_docs())]
            found = await asyncio.gather(*(self._docs.read(key) for key in keys))
            await self._docs.remove([v for v in found if v is not None])

    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        if run_ids is not None:
            versions = await self._of_run_ids(run_ids, agent_ids)
            if after is not None:
                versions = [v for v in versions if _doc_order(v) > _order(after)]
            versions.sort(key=_doc_order)
        elif agent_ids is not None:
            # Each agent's index is already in list order: the first `limit` of each,
            # merged, hold the first `limit` overall.
            per_agent = await asyncio.gather(
                *(self._of_agent(agent_id, after=after, limit=limit) for agent_id in agent_ids)
            )
            versions = list(heapq.merge(*per_agent, key=_doc_order))
        else:
            versions = await self._all(after=after, limit=limit)
        return [v.doc for v in versions[:limit]]

    async def _read_valid(self, agent_id: str, run_id: str, rev: str) -> Version | None:
        version = await self._docs.read(self._layout.run_doc(agent_id, run_id))
        return version if version is not None and version.rev == rev else None

    async def _all(self, *, after: RunPosition | None, limit: int) -> builtins.list[Version]:
        prefix = self._layout.runs_order()
        start_after = None
        if after is not None:
            start_after = prefix + (
                f"{ordered_int(after.turn_number)}/{hex_id(after.run_id)}/"
                f"{hex_id(after.agent_id)}/{_PAST}"
            )

        async def resolve(entry: Listed) -> Version | None:
            _turn, run_hex, agent_hex, rev = entry.key[len(prefix) :].split("/")
            return await self._read_valid(unhex_id(agent_hex), unhex_id(run_hex), rev)

        return await self._scan.take(prefix, start_after=start_after, want=limit, resolve=resolve)

    async def _of_agent(
        self, agent_id: str, *, after: RunPosition | None, limit: int
    ) -> builtins.list[Version]:
        prefix = self._layout.runs_of_agent(agent_id)
        start_after = None
        if after is not None:
            # Runs of this agent at the cursor's (turn, runId) follow the cursor only if
            # this agent's id sorts after the cursor's agent id.
            same_position_follows = agent_id > after.agent_id
            start_after = prefix + (
                f"{ordered_int(after.turn_number)}/{hex_id(after.run_id)}/"
                + ("" if same_position_follows else _PAST)
            )

        async def resolve(entry: Listed) -> Version | None:
            run_hex, rev = entry.key[len(prefix) :].split("/")[1:]
            return await self._read_valid(agent_id, unhex_id(run_hex), rev)

        return await self._scan.take(prefix, start_after=start_after, want=limit, resolve=resolve)

    async def _of_run_ids(
        self, run_ids: Sequence[str], agent_ids: Sequence[str] | None
    ) -> builtins.list[Version]:
        """Every run with one of ``run_ids`` (and of one of ``agent_ids``, if given)."""
        wanted_agents = None if agent_ids is None else set(agent_ids)
        keys: builtins.list[str] = []
        for run_id in run_ids:
            async for key in self._bucket.iter_keys(self._layout.run_docs_of_id(run_id)):
                if wanted_agents is None or unhex_id(last_segment(key)) in wanted_agents:
                    keys.append(key)
        found = await asyncio.gather(*(self._docs.read(key) for key in keys))
        return [v for v in found if v is not None]
