"""Leases: one key per lease, ``SET NX PX`` to take it, token-checked renewals and release.

The key holds the holder's token and expires by itself (``PX``), so a holder that
died frees the lease within its ``seconds``. Renewing and releasing compare the token
first, in one script, so a holder whose lease expired and was taken by another server
never extends or deletes the other's.
"""

from __future__ import annotations

from redis.asyncio import Redis, RedisCluster

from .errors import redis_errors
from .keys import KeySpace, utf8

# Take the lease if it is free, or renew it if this holder has it.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLeases:
    def __init__(self, client: Redis | RedisCluster, keys: KeySpace) -> None:
        self._keys = keys
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)

    def key(self, name: str) -> bytes:
        # Under the agents tag: one slot, and matched by the prefix's SCAN patterns.
        return utf8(f"{self._keys.tag('agents')}:lease:{name}")

    @redis_errors
    async def acquire(self, name: str, holder: str, seconds: float) -> bool:
        milliseconds = max(1, round(seconds * 1000))
        taken = await self._acquire(keys=[self.key(name)], args=[utf8(holder), milliseconds])
        return bool(taken)

    @redis_errors
    async def release(self, name: str, holder: str) -> None:
        await self._release(keys=[self.key(name)], args=[utf8(holder)])
