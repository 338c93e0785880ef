"""Run event logs: one sorted set per run, scored by seq.

Each member is the seq as 16 decimal digits followed by the event JSON (without seq
and offset, which the member's head gives back); the head keeps members unique when
two events have the same body. ``ZRANGE ... BYSCORE LIMIT`` reads the events after
any offset in O(log n + page).

Why not a stream (``XADD``/``XRANGE`` with ids ``<seq>-0``), the other natural fit:
measured on this machine (bench/redis_events.py, docs/redis.md), reading a page of
100 events took Redis about 4x more time with ``XRANGE`` than with ``ZRANGE`` and,
worse, a 3-11x longer round trip, mostly redis-py parsing the reply (a stream reply
nests two arrays per entry; the pure-Python parser pays per element), while a stream
takes 11-19% less memory. The store's hot path is read-heavy (every observer polls
every 250 ms) and Redis is the one shared thread, so the sorted set wins. A list
(``LRANGE``) is smallest but walks from the nearer end: reading the middle of a long
log costs O(n).

Per run: the sorted set ``log:<runId>`` and the hash ``keys:<runId>``
(idempotencyKey -> seq). The sorted set ``runs`` registers every run that has a log,
scored by when the log expires (``inf`` without retention), so deleting every log
needs no SCAN.

Cluster layout (``KeySpace.spread``): each run's two keys are in a slot of their own,
so the logs spread over the shards, and there is no registry: updated by every append
it would put one key of every append back on one shard, and kept apart from the logs
it could disagree with them after a failure. Deleting every log of a tenant SCANs the
primaries for its keys instead; that is an administrative call, never the bridge's
per-turn path.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.substores import (
    appended_event,
    check_restore,
    duplicate_key,
    gap,
    stored_event,
)
from bridge_store.errors import invalid_argument
from bridge_store.types import Document
from bridge_store.wire.jsontext import dumps, loads_document

from ._rows import DELETE_BATCH, Tenants, tenants_holding
from .errors import redis_errors
from .keys import KeySpace, from_utf8, tenant_of_part, utf8
from .scripts import Scripts

#: Digits of the seq at the head of each member (2**53 has 16).
SEQ_WIDTH = 16


def _stored(member: bytes) -> Document:
    return stored_event(loads_document(member[SEQ_WIDTH:]), int(member[:SEQ_WIDTH]))


class RedisRunEvents:
    def __init__(
        self,
        client: Redis | RedisCluster,
        keys: KeySpace,
        scripts: Scripts,
        *,
        ttl_seconds: int | None,
    ) -> None:
        self._client = client
        self._root = keys
        self._keys = Tenants(keys.of_tenant)
        self._scripts = scripts
        self._ttl_ms = 0 if ttl_seconds is None else ttl_seconds * 1000

    @redis_errors
    async def append(self, tenant: str, event: Document) -> Document:
        run_id = event["runId"]
        result: list[Any] = await self._scripts.append_event(
            keys=self._log_keys(self._keys.of(tenant), run_id),
            args=[utf8(run_id), dumps(event), utf8(event["idempotencyKey"] or ""), self._ttl_ms],
        )
        if len(result) == 1:
            return stored_event(event, int(result[0]))
        return _stored(result[1])

    def _log_keys(self, keys: KeySpace, run_id: str) -> list[str | bytes]:
        """The keys an append or a restore script takes (the registry: plain layout only)."""
        names: list[str | bytes] = [keys.event_log(run_id), keys.event_keys(run_id)]
        if not keys.spread:
            names.append(keys.event_runs())
        return names

    @redis_errors
    async def list(self, tenant: str, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        members = await self._client.zrange(
            self._keys.of(tenant).event_log(run_id),
            after_seq + 1,
            "+inf",
            byscore=True,
            offset=0,
            num=limit,
        )
        return [_stored(member) for member in cast("list[bytes]", members)]

    @redis_errors
    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        check_restore(run_id, events)
        if not events:
            return 0
        keys = self._keys.of(tenant)
        args: list[bytes | int] = [utf8(run_id), self._ttl_ms]
        for event in events:
            member = b"%016d" % event["seq"] + dumps(appended_event(event))
            args.extend((event["seq"], member, utf8(event["idempotencyKey"] or "")))
        result: list[Any] = await self._scripts.restore_events(
            keys=self._log_keys(keys, run_id), args=args
        )
        if result[0] == b"gap":
            raise invalid_argument(gap(run_id, int(result[1]), int(events[0]["seq"])))
        if result[0] == b"key":
            raise duplicate_key(run_id, from_utf8(result[1]))
        return int(result[0])

    @redis_errors
    async def delete(self, tenant: str, run_ids: Sequence[str] | None) -> None:
        keys = self._keys.of(tenant)
        if keys.spread:
            await self._delete_spread(keys, run_ids)
            return
        if run_ids is not None:
            for start in range(0, len(run_ids), DELETE_BATCH):
                await self._delete_logs(keys, run_ids[start : start + DELETE_BATCH])
            return
        # Every log: take the registered runs a batch at a time until none is left.
        while registered := cast(
            "list[bytes]",
            await self._client.zrange(keys.event_runs(), 0, DELETE_BATCH - 1),
        ):
            await self._delete_logs(keys, [from_utf8(run_id) for run_id in registered])

    async def _delete_logs(self, keys: KeySpace, run_ids: Sequence[str]) -> None:
        names: list[str | bytes] = [keys.event_runs()]
        for run_id in run_ids:
            names.extend((keys.event_log(run_id), keys.event_keys(run_id)))
        await self._scripts.delete_event_logs(keys=names, args=[utf8(run_id) for run_id in run_ids])

    async def _delete_spread(self, keys: KeySpace, run_ids: Sequence[str] | None) -> None:
        if run_ids is not None:
            for run_id in run_ids:
                # One command: both keys are in the run's slot.
                await self._client.unlink(keys.event_log(run_id), keys.event_keys(run_id))
            return
        # SCAN may return a key twice; UNLINK of a missing key is harmless.
        for pattern in keys.event_logs_patterns():
            async for key in self._client.scan_iter(match=pattern, count=1000):
                await self._client.unlink(key)

    @redis_errors
    async def tenants(self) -> builtins.list[str]:
        if not self._root.spread:
            return await tenants_holding(self._client, self._root, "runEvents", ":runs")
        found: dict[str, None] = {}  # SCAN may return a key twice
        for separator in ("#", "!"):  # the two forms of a run's tag (keys.py)
            head = f"{{{self._root.prefix}:runEvents{separator}"
            async for key in self._client.scan_iter(match=f"{head}*", count=1000):
                part = from_utf8(key)[len(head) :].split(separator, 1)[0]
                found[tenant_of_part(part)] = None
        return list(found)

    async def run_ids(self, tenant: str) -> AsyncIterator[builtins.list[str]]:
        # Read whole (ids only: small next to the logs), since SCAN and ZSCAN cursors
        # cannot be kept across the pages without holding a connection.
        run_ids = await self._all_run_ids(self._keys.of(tenant))
        for start in range(0, len(run_ids), DELETE_BATCH):
            yield run_ids[start : start + DELETE_BATCH]

    @redis_errors
    async def _all_run_ids(self, keys: KeySpace) -> builtins.list[str]:
        found: dict[str, None] = {}
        if keys.spread:
            # {prefix:runEvents#tenant#<run id>}:log, and the same with :keys.
            for pattern in keys.event_logs_patterns():
                async for key in self._client.scan_iter(match=pattern, count=1000):
                    run_id = keys.run_of_log(key)
                    if run_id is not None:
                        found[run_id] = None
            return list(found)
        # The registry scores each run by when its log expires: skip those that have.
        now_ms = time.time() * 1000
        async for member, score in self._client.zscan_iter(keys.event_runs(), count=1000):
            if score >= now_ms:
                found[from_utf8(member)] = None
        return list(found)
