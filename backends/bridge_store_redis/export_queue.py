"""The export queue (``features.ExportQueue``): one sorted set, scored by queue time.

``{<prefix>:runs}:export-queue`` holds one member per run waiting, every tenant's
together: the tenant and the agent id :func:`~.keys.terminated`, then the run id, so
members of one score sort as ``(tenant, agent_id, run_id)`` and the set hands out
the oldest first (``ZRANGE`` by score, ties by member bytes). ``ZADD`` of a member
already there replaces its score: a run queued again keeps one member with its new
time. Unqueuing compares the score first, in one script, so a run queued again after
it was taken stays. Scores are doubles, exact for every integer up to 2**53.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.features import QueuedRun

from .errors import redis_errors
from .keys import KeySpace, split_terminated, terminated, utf8

_UNQUEUE = """
for i = 1, #ARGV, 2 do
    local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
    if score and tonumber(score) == tonumber(ARGV[i + 1]) then
        redis.call('ZREM', KEYS[1], ARGV[i])
    end
end
return 0
"""


def member(run: QueuedRun) -> bytes:
    return terminated(run.tenant) + terminated(run.agent_id) + utf8(run.run_id)


def queued_run(data: bytes, score: float) -> QueuedRun:
    tenant, rest = split_terminated(data)
    agent_id, run_id = split_terminated(rest)
    return QueuedRun(int(score), tenant, agent_id, run_id.decode("utf-8", "surrogatepass"))


class RedisExportQueue:
    def __init__(self, client: Redis | RedisCluster, keys: KeySpace) -> None:
        self._client = client
        # Under the runs tag: one slot, and matched by the prefix's SCAN patterns.
        self.key = utf8(f"{keys.tag('runs')}:export-queue")
        self._unqueue = client.register_script(_UNQUEUE)

    @redis_errors
    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        if runs:
            await self._client.zadd(self.key, {member(run): run.queued_ms for run in runs})

    @redis_errors
    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        if limit < 1:
            return []
        found = await self._client.zrange(self.key, 0, limit - 1, withscores=True)
        # With scores, redis-py answers (member bytes, score float) pairs.
        pairs = cast("list[tuple[bytes, float]]", found)
        return [queued_run(data, score) for data, score in pairs]

    @redis_errors
    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        if not runs:
            return
        args: list[bytes | int] = []
        for run in runs:
            args += [member(run), run.queued_ms]
        await self._unqueue(keys=[self.key], args=args)

    @redis_errors
    async def queued_count(self) -> int:
        return int(await self._client.zcard(self.key))
