"""Run event logs: one Redis Stream per run, entry id ``<seq>-0``.

Why a stream: appends are O(1); the entry id is the seq, so ``XRANGE`` seeks straight
to any offset in O(log n) (a list's ``LRANGE`` walks from the nearer end, a sorted set
costs a skiplist node and a dict entry per event); entries pack into listpacks, which
keeps long logs compact; and ``XREAD BLOCK`` could later push events to observers
instead of the bridge's 250 ms polling.

Per run: the stream ``log:<runId>`` (field ``e``: the event JSON without seq/offset,
which the id gives back) and the hash ``keys:<runId>`` (idempotencyKey -> seq). The
sorted set ``runs`` registers every run that has a log, scored by when the log
expires (``inf`` without retention), so deleting every log needs no SCAN.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio import Redis

from bridge_store.contract import stored_event
from bridge_store.types import Document

from ._docs import decode, encode
from ._errors import redis_errors
from ._rows import DELETE_BATCH
from .keys import KeySpace, from_utf8, utf8
from .scripts import Scripts


class RedisRunEvents:
    def __init__(
        self, client: Redis, keys: KeySpace, scripts: Scripts, *, ttl_seconds: int | None
    ) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts
        self._ttl_ms = 0 if ttl_seconds is None else ttl_seconds * 1000

    @redis_errors
    async def append(self, event: Document) -> Document:
        run_id = event["runId"]
        result: list[Any] = await self._scripts.append_event(
            keys=[
                self._keys.event_log(run_id),
                self._keys.event_keys(run_id),
                self._keys.event_runs(),
            ],
            args=[utf8(run_id), encode(event), utf8(event["idempotencyKey"] or ""), self._ttl_ms],
        )
        seq = int(result[0])
        if len(result) == 1:
            return stored_event(event, seq)
        return stored_event(decode(result[1]), seq)

    @redis_errors
    async def list(self, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        bodies: list[bytes] = await self._scripts.read_events(
            keys=[self._keys.event_log(run_id)], args=[after_seq + 1, limit]
        )
        return [
            stored_event(decode(body), seq) for seq, body in enumerate(bodies, start=after_seq + 1)
        ]

    @redis_errors
    async def delete(self, run_ids: Sequence[str] | None) -> None:
        if run_ids is not None:
            for start in range(0, len(run_ids), DELETE_BATCH):
                await self._delete_logs(run_ids[start : start + DELETE_BATCH])
            return
        # Every log: take the registered runs a batch at a time until none is left.
        while registered := cast(
            "list[bytes]",
            await self._client.zrange(self._keys.event_runs(), 0, DELETE_BATCH - 1),
        ):
            await self._delete_logs([from_utf8(run_id) for run_id in registered])

    async def _delete_logs(self, run_ids: Sequence[str]) -> None:
        keys: list[str | bytes] = [self._keys.event_runs()]
        for run_id in run_ids:
            keys.extend((self._keys.event_log(run_id), self._keys.event_keys(run_id)))
        await self._scripts.delete_event_logs(keys=keys, args=[utf8(run_id) for run_id in run_ids])
