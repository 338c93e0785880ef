"""The Redis connection pool's quick path keeps the blocking pool's guarantees."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.errors import Code, ConnectError
from bridge_store_redis.backend import RedisBackend
from bridge_store_redis.pool import QuickBlockingPool

from .support.redis import MakeRedisUrl

pytestmark = pytest.mark.redis

TENANT = "default"


@pytest.fixture
async def open_redis(make_redis_url: MakeRedisUrl) -> AsyncIterator[Callable[..., Any]]:
    opened: list[RedisBackend] = []

    async def open_with(**params: str) -> RedisBackend:
        backend = open_backend(get_plugin_manager(), make_redis_url(**params))
        assert isinstance(backend, RedisBackend)
        await backend.start(migrate=True)
        opened.append(backend)
        return backend

    yield open_with
    for backend in opened:
        await backend.close()


def pool_of(backend: RedisBackend) -> QuickBlockingPool:
    client = backend._client
    assert isinstance(client, redis.asyncio.Redis)
    pool = client.connection_pool
    assert isinstance(pool, QuickBlockingPool)
    return pool


async def test_an_exhausted_pool_waits_its_timeout_then_is_unavailable(
    open_redis: Callable[..., Any],
) -> None:
    backend = await open_redis(max_connections="1", socket_timeout="0.5")
    pool = pool_of(backend)
    held = await pool.get_connection()
    started = time.monotonic()
    with pytest.raises(ConnectError) as caught:
        await backend.agents.get(TENANT, "a")
    assert caught.value.code == Code.UNAVAILABLE
    assert 0.4 < time.monotonic() - started < 5
    await pool.release(held)
    assert await backend.agents.get(TENANT, "a") is None


async def test_calls_waiting_for_a_connection_get_one_when_it_is_returned(
    open_redis: Callable[..., Any],
) -> None:
    backend = await open_redis(max_connections="2")
    pool = pool_of(backend)
    held = await pool.get_connection()
    # 20 calls share the one connection left, and the held one once it is returned.
    calls = asyncio.gather(*(backend.agents.get(TENANT, f"a{n}") for n in range(20)))
    await asyncio.sleep(0.05)
    await pool.release(held)
    assert await asyncio.wait_for(calls, 10) == [None] * 20
    assert backend.pool_stats().in_use == 0


async def test_an_idle_connection_the_server_closed_is_replaced_before_use(
    open_redis: Callable[..., Any], make_redis_url: MakeRedisUrl
) -> None:
    backend = await open_redis()
    assert await backend.agents.get(TENANT, "a") is None
    idle = list(pool_of(backend)._available_connections)
    assert idle
    with redis.Redis.from_url(make_redis_url().split("?")[0]) as admin:
        for connection in idle:
            admin.client_kill_filter(_id=await connection_id(connection))
    await asyncio.sleep(0.2)  # the close reaches this process
    # Not an `unavailable` for the first call after: the closed socket is seen before
    # the command is sent, and the connection made again.
    assert await backend.agents.get(TENANT, "a") is None


async def connection_id(connection: Any) -> int:
    await connection.send_command("CLIENT", "ID")
    return int(await connection.read_response())
