"""Checkpoint blobs: one string key per blob, and two ordered indexes.

A blob is identified by ``field = terminated(blobId) + agentId``, which already sorts
in the contract's order (blobId, agentId); its bytes live in ``blob:<field>``. Blobs
get keys of their own, not fields of one hash, so that no single key grows with every
blob of a deployment (a multi-gigabyte key blocks Redis when it is deleted, dumped or
migrated between cluster nodes). Index members:

- ``by-blob``: the field itself, for unfiltered and blobIds-filtered lists;
- ``by-agent``: ``terminated(agentId) + terminated(blobId)``, one range per agent.

A blob's index members follow from its identity, so unlike agents and runs no record
of them is kept. Listing reads the indexes only, never the blobs. A blob over 1 MiB is
read in pieces, all of one version (``blob_reads.py``).

Cluster layout (``KeySpace.spread``): the bytes live in their agent's slot, the indexes
in the substore's, so no script can change both. The steps are ordered, and each
re-checks the other side, so that one create and one delete of the same blob leave
bytes and index agreeing in whatever order their steps interleave, and a call cut off
half-way is completed by repeating it:

- create: ``SET NX`` the bytes; add the index entries (also when the bytes already
  existed: a create cut off after its first step is mended by the retry, which then
  answers ``already_exists``); if the bytes are gone again (a delete ran between),
  remove the entries.
- delete: ``DEL`` the bytes; remove the index entries; re-add those whose bytes exist
  again (a create ran between).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.substores import BlobRef
from bridge_store.errors import already_exists, not_found

from ._rows import DELETE_BATCH, Range, Tenants, read_ranges, tenants_holding
from .blob_reads import read_blob
from .errors import redis_errors
from .keys import KeySpace, from_utf8, split_terminated, terminated, utf8
from .scripts import Scripts


def _field(agent_id: str, blob_id: str) -> bytes:
    return terminated(blob_id) + utf8(agent_id)


def _ref(field: bytes) -> BlobRef:
    blob_id, rest = split_terminated(field)
    return BlobRef(blob_id=blob_id, agent_id=from_utf8(rest))


def _by_agent_member(ref: BlobRef) -> bytes:
    return terminated(ref.agent_id) + terminated(ref.blob_id)


class RedisCheckpoints:
    def __init__(self, client: Redis | RedisCluster, keys: KeySpace, scripts: Scripts) -> None:
        self._client = client
        self._root = keys
        self._keys = Tenants(keys.of_tenant)
        self._scripts = scripts

    def _indexes(self, tenant: str) -> tuple[KeySpace, str, str]:
        """The tenant's key space, its by-blob and its by-agent index."""
        keys = self._keys.of(tenant)
        return keys, keys.blob_index("blob"), keys.blob_index("agent")

    @redis_errors
    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        key = self._keys.of(tenant).blob(agent_id, _field(agent_id, blob_id))
        # A large blob in pieces, each of one version: see blob_reads.py.
        return await read_blob(self._client, self._scripts, key)

    @redis_errors
    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        field = _field(agent_id, blob_id)
        keys, by_blob, by_agent = self._indexes(tenant)
        members = [field, terminated(agent_id) + terminated(blob_id)]
        key = keys.blob(agent_id, field)
        if keys.spread:
            created = await self._client.set(key, data, nx=True)
            await self._scripts.index_blobs(keys=[by_blob, by_agent], args=[1, *members])
            if not await self._client.exists(key):
                await self._scripts.index_blobs(keys=[by_blob, by_agent], args=[0, *members])
        else:
            created = await self._scripts.create_blob(
                keys=[key, by_blob, by_agent], args=[data, *members]
            )
        if not created:
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")

    @redis_errors
    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        # One key, no index change: SET ... XX replaces it only if it exists.
        key = self._keys.of(tenant).blob(agent_id, _field(agent_id, blob_id))
        if not await self._client.set(key, data, xx=True):
            raise not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")

    @redis_errors
    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        if agent_ids is not None and blob_ids is not None:
            refs = [BlobRef(blob_id=b, agent_id=a) for a in agent_ids for b in blob_ids]
            for start in range(0, len(refs), DELETE_BATCH):
                await self._delete(tenant, refs[start : start + DELETE_BATCH])
            return
        _, by_blob, by_agent = self._indexes(tenant)
        if agent_ids is not None:
            index, spans = by_agent, [_agent_span(a, None) for a in agent_ids]
        elif blob_ids is not None:
            index, spans = by_blob, [Range.starting_with(terminated(b)) for b in blob_ids]
        else:
            index, spans = by_blob, [Range.starting_with(b"")]
        # A batch is read, then deleted atomically with its index entries; a blob
        # created in between is simply not deleted, as if created after the delete.
        for span in spans:
            while True:
                [page] = await read_ranges(self._scripts, index, [span], limit=DELETE_BATCH)
                await self._delete(tenant, [_ref(row.field) for row in page])
                if len(page) < DELETE_BATCH:
                    break

    async def _delete(self, tenant: str, refs: Sequence[BlobRef]) -> None:
        if not refs:
            return
        keys, by_blob, by_agent = self._indexes(tenant)
        fields = [_field(ref.agent_id, ref.blob_id) for ref in refs]
        members: list[bytes] = []
        for field, ref in zip(fields, refs, strict=True):
            members.extend((field, _by_agent_member(ref)))
        blobs = [keys.blob(ref.agent_id, field) for field, ref in zip(fields, refs, strict=True)]
        if not keys.spread:
            await self._scripts.delete_blobs(keys=[by_blob, by_agent, *blobs], args=members)
            return
        for blob in blobs:
            await self._client.delete(blob)
        await self._scripts.index_blobs(keys=[by_blob, by_agent], args=[0, *members])
        back: list[bytes] = []
        for n, blob in enumerate(blobs):
            if await self._client.exists(blob):
                back.extend(members[2 * n : 2 * n + 2])
        if back:
            await self._scripts.index_blobs(keys=[by_blob, by_agent], args=[1, *back])

    @redis_errors
    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        _, by_blob, by_agent = self._indexes(tenant)
        if agent_ids is not None and blob_ids is not None:
            fields = [_field(a, b) for a in agent_ids for b in blob_ids]
            # redis-py annotates members as str; bytes go over the wire unchanged.
            scores = await self._client.zmscore(by_blob, cast("list[str]", fields))
            refs = [
                _ref(field)
                for field, score in zip(fields, scores, strict=True)
                if score is not None
            ]
        else:
            if agent_ids is not None:
                index, spans = by_agent, [_agent_span(a, after) for a in agent_ids]
            elif blob_ids is not None:
                index = by_blob
                spans = [span for b in blob_ids if (span := _blob_span(b, after)) is not None]
            else:
                span = Range.starting_with(b"")
                if after is not None:
                    span = span.with_low(b"(" + _field(after.agent_id, after.blob_id))
                index, spans = by_blob, [span]
            pages = await read_ranges(self._scripts, index, spans, limit=limit)
            refs = [_ref(row.field) for page in pages for row in page]
        return sorted(ref for ref in refs if after is None or ref > after)[:limit]

    @redis_errors
    async def tenants(self) -> builtins.list[str]:
        return await tenants_holding(self._client, self._root, "checkpoints", ":by-blob")


def _agent_span(agent_id: str, after: BlobRef | None) -> Range:
    """The blobs of one agent after ``after``; within one agent the order is blobId."""
    prefix = terminated(agent_id)
    span = Range.starting_with(prefix, skip=len(prefix), after=utf8(agent_id))
    if after is None:
        return span
    # The position's own blobId still follows it when this agent sorts after its agent.
    inclusive = agent_id > after.agent_id
    return span.with_low((b"[" if inclusive else b"(") + prefix + terminated(after.blob_id))


def _blob_span(blob_id: str, after: BlobRef | None) -> Range | None:
    """The agents holding this blob id after ``after``; None if all come before it."""
    prefix = terminated(blob_id)
    span = Range.starting_with(prefix)
    if after is None or blob_id > after.blob_id:
        return span
    if blob_id < after.blob_id:
        return None
    return span.with_low(b"(" + prefix + utf8(after.agent_id))
