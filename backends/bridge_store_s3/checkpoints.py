"""checkpoints on S3: each blob's raw bytes as one object, keyed agent first.

Keying by agent makes the bridge's calls (get/create by agent and blob, delete every
blob of an agent) direct keys or one prefix listing. The list order across agents
(blobId, then agentId) comes from an index of empty entries ``order/<blob>/<agent>/<rev>``,
kept and checked like the agent and run indexes (see ``_index.py``); a blob keeps its
rev across updates, so replacing the bytes leaves its entry valid.
"""

from __future__ import annotations

import asyncio
import builtins
import heapq
import time
from collections.abc import Sequence

from bridge_store.backend.substores import BlobRef
from bridge_store.errors import already_exists, not_found, unavailable

from ._bucket import Bucket, Listed, backoff
from ._index import (
    MAX_CONFLICTS,
    STALE_GRACE,
    IndexScan,
    drop_quietly,
    new_rev,
    put_entries,
    put_new,
)
from .errors import PreconditionFailed
from .keys import Layout, checked, hex_id, last_segment, unhex_id

_PAST = "~"


class TenantCheckpoints:
    """One tenant's checkpoints: everything under its layout's prefix."""

    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._layout = layout
        self._scan: IndexScan[BlobRef] = IndexScan(bucket, "checkpoint")

    def _entry(self, ref: BlobRef, rev: str) -> str:
        return checked(
            self._layout.blobs_order() + f"{hex_id(ref.blob_id)}/{hex_id(ref.agent_id)}/{rev}"
        )

    async def get(self, agent_id: str, blob_id: str) -> bytes | None:
        stored = await self._bucket.get(self._layout.blob(agent_id, blob_id), blob=True)
        return stored.body if stored is not None else None

    async def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        key = self._layout.blob(agent_id, blob_id)
        rev = new_rev()
        entry = self._entry(BlobRef(blob_id=blob_id, agent_id=agent_id), rev)
        await put_entries(self._bucket, [entry])
        started = time.monotonic()
        if not await put_new(self._bucket, key, data, rev, blob=True):
            await drop_quietly(self._bucket, [entry], "checkpoint index entries")
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")
        if time.monotonic() - started > STALE_GRACE.total_seconds() / 2:
            await put_entries(self._bucket, [entry])

    async def update(self, agent_id: str, blob_id: str, data: bytes) -> None:
        key = self._layout.blob(agent_id, blob_id)
        missing = not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")
        for attempt in range(MAX_CONFLICTS):
            head = await self._bucket.head(key)
            if head is None:
                raise missing
            try:
                # Same rev: the blob's index entry stays valid.
                await self._bucket.put(key, data, rev=head.rev, if_match=head.etag, blob=True)
            except PreconditionFailed:
                # Changed or deleted since the HEAD: look again.
                await backoff(attempt)
                continue
            return
        raise unavailable(f"checkpoint blob {blob_id}: too many concurrent updates, try again")

    async def delete(self, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None) -> None:
        if agent_ids is not None:
            wanted = None if blob_ids is None else set(blob_ids)
            refs = [
                ref
                for agent_id in agent_ids
                for ref in await self._of_agent(agent_id, after=None, blob_ids=wanted)
            ]
        elif blob_ids is not None:
            refs = [ref for blob_id in blob_ids for ref in await self._all_of_blob(blob_id)]
        else:
            prefix = self._layout.blobs()
            refs = []
            async for key in self._bucket.iter_keys(prefix):
                agent_hex, blob_hex = key[len(prefix) :].split("/")
                refs.append(BlobRef(blob_id=unhex_id(blob_hex), agent_id=unhex_id(agent_hex)))
        keys = [self._layout.blob(ref.agent_id, ref.blob_id) for ref in refs]
        heads = await asyncio.gather(*(self._bucket.head(key) for key in keys))
        await self._bucket.delete(keys)
        entries = [
            self._entry(ref, head.rev)
            for ref, head in zip(refs, heads, strict=True)
            if head is not None and head.rev is not None
        ]
        await drop_quietly(self._bucket, entries, "deleted checkpoint index entries")

    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        wanted = None if blob_ids is None else set(blob_ids)
        if agent_ids is not None:
            # Each agent's blobs list in blobId order: merging the first `limit` of each
            # gives the first `limit` overall.
            per_agent = await asyncio.gather(
                *(
                    self._of_agent(agent_id, after=after, blob_ids=wanted, limit=limit)
                    for agent_id in agent_ids
                )
            )
            return list(heapq.merge(*per_agent))[:limit]
        if blob_ids is not None:
            per_blob = await asyncio.gather(
                *(self._indexed(blob_id, after=after, limit=limit) for blob_id in sorted(blob_ids))
            )
            return [ref for refs in per_blob for ref in refs][:limit]
        return await self._indexed(None, after=after, limit=limit)

    async def _of_agent(
        self,
        agent_id: str,
        *,
        after: BlobRef | None,
        blob_ids: set[str] | None,
        limit: int | None = None,
    ) -> builtins.list[BlobRef]:
        """The agent's blobs after ``after`` in (blobId, agentId) order, from its prefix."""
        prefix = self._layout.blobs_of_agent(agent_id)
        refs: builtins.list[BlobRef] = []
        start_after = None
        if after is not None:
            start_after = self._layout.blob(agent_id, after.blob_id)
            # StartAfter excludes the cursor's own blob id; this agent's blob with that
            # id still follows the cursor when this agent's id sorts after the cursor's.
            cursor_blob_follows = agent_id > after.agent_id and (
                blob_ids is None or after.blob_id in blob_ids
            )
            if cursor_blob_follows and await self._bucket.head(start_after) is not None:
                refs.append(BlobRef(blob_id=after.blob_id, agent_id=agent_id))
        async for key in self._bucket.iter_keys(prefix, start_after=start_after):
            if limit is not None and len(refs) >= limit:
                break
            blob_id = unhex_id(last_segment(key))
            if blob_ids is None or blob_id in blob_ids:
                refs.append(BlobRef(blob_id=blob_id, agent_id=agent_id))
        return refs

    async def _all_of_blob(self, blob_id: str) -> builtins.list[BlobRef]:
        refs: builtins.list[BlobRef] = []
        while batch := await self._indexed(blob_id, after=refs[-1] if refs else None, limit=1000):
            refs.extend(batch)
        return refs

    async def _indexed(
        self, blob_id: str | None, *, after: BlobRef | None, limit: int
    ) -> builtins.list[BlobRef]:
        """Blob refs from the order index (all blobs, or the agents of one blob id)."""
        prefix = self._layout.blobs_order()
        scan_prefix = prefix if blob_id is None else self._layout.blob_order_of_id(blob_id)
        start_after = None
        if after is not None:
            if blob_id is not None and blob_id < after.blob_id:
                return []
            if blob_id is None or blob_id == after.blob_id:
                start_after = prefix + f"{hex_id(after.blob_id)}/{hex_id(after.agent_id)}/{_PAST}"

        async def resolve(entry: Listed) -> BlobRef | None:
            blob_hex, agent_hex, rev = entry.key[len(prefix) :].split("/")
            ref = BlobRef(blob_id=unhex_id(blob_hex), agent_id=unhex_id(agent_hex))
            head = await self._bucket.head(self._layout.blob(ref.agent_id, ref.blob_id))
            return ref if head is not None and head.rev == rev else None

        return await self._scan.take(
            scan_prefix, start_after=start_after, want=limit, resolve=resolve
        )
