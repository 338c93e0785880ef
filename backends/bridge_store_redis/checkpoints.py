"""Checkpoint blobs: one hash of blob bytes keyed by (blobId, agentId), two indexes.

The row field is ``terminated(blobId) + agentId``, which already sorts in the
contract's order (blobId, agentId). Index members:

- ``by-blob``: the field itself, for unfiltered and blobIds-filtered lists;
- ``by-agent``: ``terminated(agentId) + terminated(blobId)``, one range per agent.

Listing reads index members only, never the blobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from bridge_store.errors import already_exists, not_found
from bridge_store.substores import BlobRef

from ._errors import redis_errors
from ._rows import Range, RowTable
from .keys import KeySpace, from_utf8, split_terminated, terminated, utf8
from .scripts import Scripts

_BY_BLOB, _BY_AGENT = 1, 2


def _field(agent_id: str, blob_id: str) -> bytes:
    return terminated(blob_id) + utf8(agent_id)


def _ref(field: bytes) -> BlobRef:
    blob_id, rest = split_terminated(field)
    return BlobRef(blob_id=blob_id, agent_id=from_utf8(rest))


class RedisCheckpoints:
    def __init__(self, client: Redis, keys: KeySpace, scripts: Scripts) -> None:
        self._table = RowTable(client, keys.table("checkpoints", ("blob", "agent")), scripts)

    @redis_errors
    async def get(self, agent_id: str, blob_id: str) -> bytes | None:
        return await self._table.get(_field(agent_id, blob_id))

    @redis_errors
    async def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        if not await self._table.put("create", *self._row(agent_id, blob_id, data)):
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")

    @redis_errors
    async def update(self, agent_id: str, blob_id: str, data: bytes) -> None:
        if not await self._table.put("update", *self._row(agent_id, blob_id, data)):
            raise not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")

    def _row(self, agent_id: str, blob_id: str, data: bytes) -> tuple[bytes, bytes, list[bytes]]:
        """The field, value and index members of a blob row."""
        field = _field(agent_id, blob_id)
        return field, data, [field, terminated(agent_id) + terminated(blob_id)]

    @redis_errors
    async def delete(self, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None) -> None:
        if agent_ids is not None and blob_ids is not None:
            await self._table.remove([_field(a, b) for a in agent_ids for b in blob_ids])
        elif agent_ids is not None:
            for agent_id in agent_ids:
                await self._table.remove_range(_BY_AGENT, _agent_span(agent_id, None))
        elif blob_ids is not None:
            for blob_id in blob_ids:
                await self._table.remove_range(_BY_BLOB, Range.starting_with(terminated(blob_id)))
        else:
            await self._table.remove_range(_BY_BLOB, Range.starting_with(b""))

    @redis_errors
    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        if agent_ids is not None and blob_ids is not None:
            fields = [_field(a, b) for a in agent_ids for b in blob_ids]
            refs = [_ref(field) for field in await self._table.existing(fields)]
        else:
            if agent_ids is not None:
                index, spans = _BY_AGENT, [_agent_span(a, after) for a in agent_ids]
            elif blob_ids is not None:
                index = _BY_BLOB
                spans = [span for b in blob_ids if (span := _blob_span(b, after)) is not None]
            else:
                span = Range.starting_with(b"")
                if after is not None:
                    span = span.with_low(b"(" + _field(after.agent_id, after.blob_id))
                index, spans = _BY_BLOB, [span]
            pages = await self._table.read(index, spans, limit=limit, fetch=False)
            refs = [_ref(row.field) for page in pages for row in page]
        return sorted(ref for ref in refs if after is None or ref > after)[:limit]


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
