"""The two failover symptoms only the write-and-WAIT path sees, each made to happen
on purpose rather than by a race (``test_redis_cluster_failover`` takes them by
chance, under load):

- a primary with an empty script cache (a promoted replica: Redis does not replicate
  ``SCRIPT LOAD``) answers NOSCRIPT; the write did not run, so the script is loaded on
  that node and the write sent again;
- a WAIT blocked while its primary is demoted is answered ``UNBLOCKED ... (master ->
  replica?)``; the write ran but no replica was counted, so the call is ``unavailable``
  (retried by the bridge), never ``internal``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio
from redis.cluster import REPLICA
from redis.exceptions import ResponseError

from bridge_store.backend.substores import BackendOptions
from bridge_store.errors import Code, ConnectError
from bridge_store_redis.cluster import BoundedCluster, cluster_client
from bridge_store_redis.errors import NotReplicated, redis_errors
from bridge_store_redis.scripts import DELETE_EVENT_LOGS
from bridge_store_redis.settings import parse_url
from testkit.services import free_port
from tests.support.redis import RedisServer
from tests.support.redis_cluster import MakeClusterUrl, RedisCluster

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("wait_replicas", ["0", "1"])
async def test_a_primary_the_client_does_not_know_of_is_sent_the_script(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl, wait_replicas: str
) -> None:
    url = make_cluster_url(wait_replicas=wait_replicas)
    client = cluster_client(parse_url(url), BackendOptions())
    # A write script (so it takes the WAIT path with wait_replicas) that, given no
    # run ids, changes nothing.
    script = client.register_script(DELETE_EVENT_LOGS)
    key = f"{{{parse_url(url).prefix}}}:registry"
    try:
        await script(keys=[key])
        owner = redis_cluster.owner_of(key)
        # A promoted replica: an empty script cache...
        with owner.client() as raw:
            raw.script_flush()
        # ...that the client's map still takes for a replica, as after a failover it
        # has not heard of: redis-py's own fallback (SCRIPT LOAD on the primaries it
        # knows of) misses it, and the write answered NOSCRIPT again.
        node = client.get_node_from_key(key)
        assert node is not None
        node.server_type = REPLICA
        assert node not in client.get_primaries()
        await script(keys=[key])
        with owner.client() as raw:
            assert raw.script_exists(script.sha) == [True]
    finally:
        await client.close_connections()


async def _blocked(client: redis.asyncio.Redis) -> None:
    while int((await client.info("clients"))["blocked_clients"]) == 0:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def _unblocked_by_a_demotion(server: RedisServer) -> Exception:
    """What Redis answers a WAIT that blocks while its server becomes a replica."""
    waiting = redis.asyncio.Redis(port=server.port)
    other = redis.asyncio.Redis(port=server.port)
    try:
        pipe = waiting.pipeline(transaction=False)
        pipe.set("k", "v")
        pipe.execute_command("WAIT", 1, 10_000)
        answer = asyncio.create_task(pipe.execute(raise_on_error=False))
        # Until the server has the WAIT blocked, demoting it would not unblock it.
        await asyncio.wait_for(_blocked(other), 5)
        await other.replicaof("127.0.0.1", free_port())
        written, waited = await asyncio.wait_for(answer, 5)
        await other.replicaof("NO", "ONE")
    finally:
        await waiting.aclose()
        await other.aclose()
    assert written is True
    assert isinstance(waited, ResponseError)
    return waited


async def test_a_wait_unblocked_by_a_demotion_answers_unavailable(
    redis_server: RedisServer, make_cluster_url: MakeClusterUrl
) -> None:
    unblocked = await _unblocked_by_a_demotion(redis_server)
    assert str(unblocked).startswith("UNBLOCKED")
    client = cluster_client(parse_url(make_cluster_url(wait_replicas="1")), BackendOptions())
    _answer_every_wait_with(client, unblocked)
    try:

        @redis_errors
        async def write() -> Any:
            return await client.execute_command("SET", "k", "v")

        # Beneath the mapping the failure is NotReplicated, not a ResponseError.
        with pytest.raises(NotReplicated):
            await client.execute_command("SET", "k", "v")
        with pytest.raises(ConnectError) as refused:
            await write()
        assert refused.value.code == Code.UNAVAILABLE
        assert "UNBLOCKED" in refused.value.message
    finally:
        await client.close_connections()


def _answer_every_wait_with(client: BoundedCluster, error: Exception) -> None:
    """Run each write-and-WAIT pipeline for real, then answer its WAIT with ``error``."""
    make_pipeline = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make_pipeline(*args, **kwargs)
        execute = pipe.execute

        async def answered(**options: Any) -> list[Any]:
            written, _ = await execute(**options)
            return [written, error]

        pipe.execute = answered  # type: ignore[method-assign,assignment]
        return pipe

    client.pipeline = pipeline  # type: ignore[method-assign]


async def test_a_re_map_lets_the_calls_in_flight_finish(make_cluster_url: MakeClusterUrl) -> None:
    # redis-py re-maps the cluster through aclose() on CLUSTERDOWN, an uncovered slot
    # or many MOVEDs; its own closed the connections of calls in flight, which then
    # failed inside redis-py (AttributeError: the writer was None) as 'internal'.
    url = make_cluster_url()
    client = cluster_client(parse_url(url), BackendOptions())
    key = f"{{{parse_url(url).prefix}}}:list"
    try:
        await client.execute_command("PING")
        in_flight = asyncio.create_task(client.execute_command("BLPOP", key, "0.5"))
        await asyncio.sleep(0.1)
        await client.aclose()
        assert await in_flight is None
        # The next command maps the cluster again and is served.
        assert await client.execute_command("RPUSH", key, "x") == 1
    finally:
        await client.close_connections()
