"""The Redis backend on a real Redis Cluster through its cluster client
(``redis+cluster://``): 3 primaries with a replica each, private to this module.

The conformance suite passes on it, and the keys of many runs and agents spread over
every primary (the distribution is printed; docs/redis.md records it).
"""

from __future__ import annotations

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance import ExportQueueConformance, LeaseConformance, StoreConformance
from bridge_store_redis.backend import RedisBackend
from bridge_store_redis.settings import parse_url
from tests.support.redis import store_client
from tests.support.redis_cluster import MakeClusterUrl, RedisCluster

pytestmark = pytest.mark.redis


class TestRedisOnACluster(StoreConformance):
    @pytest.fixture
    def store_url(self, make_cluster_url: MakeClusterUrl) -> str:
        return make_cluster_url()


class TestRedisLeasesOnACluster(LeaseConformance):
    @pytest.fixture
    def store_url(self, make_cluster_url: MakeClusterUrl) -> str:
        return make_cluster_url()


class TestRedisExportQueueOnACluster(ExportQueueConformance):
    @pytest.fixture
    def store_url(self, make_cluster_url: MakeClusterUrl) -> str:
        return make_cluster_url()


class TestRedisOnAClusterWaitingForReplicas(StoreConformance):
    """Every write followed by WAIT: same answers (writes go through another path)."""

    @pytest.fixture
    def store_url(self, make_cluster_url: MakeClusterUrl) -> str:
        return make_cluster_url(wait_replicas="1")


async def test_keys_of_100_runs_and_100_agents_spread_over_every_primary(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl
) -> None:
    url = make_cluster_url()
    prefix = parse_url(url).prefix
    async with store_client(url) as client:
        for n in range(100):
            await client.call("runEvents", "append", {"runId": f"run-{n}", "eventType": "t"})
            blob = {"agentId": f"agent-{n}", "blobId": "b", "data": "aGk="}
            await client.call("checkpoints", "create", blob)
    logs = redis_cluster.keys_per_primary(f"{{{prefix}:runEvents#*}}:log")
    blobs = redis_cluster.keys_per_primary(f"{{{prefix}:checkpoints#*")
    print(f"\nrun logs per primary: {sorted(logs.values())}; blobs: {sorted(blobs.values())}")
    assert len(logs) == len(blobs) == 3
    assert sum(logs.values()) == sum(blobs.values()) == 100
    # Uniform hashing gives each of 3 primaries 33 of 100 on average; 15 is far below
    # any plausible spread, and far above "all on one shard".
    assert min(logs.values()) >= 15
    assert min(blobs.values()) >= 15


async def test_wait_replicas_sends_wait_after_each_write_and_not_after_reads(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl
) -> None:
    def waits() -> int:
        total = 0
        for primary in redis_cluster.primaries():
            with primary.client() as raw:
                total += int(raw.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
        return total

    async with store_client(make_cluster_url(wait_replicas="1")) as client:
        before = waits()
        for n in range(10):
            await client.call("runEvents", "append", {"runId": f"run-{n}", "eventType": "t"})
        await client.call("runs", "list", {})
        await client.call("runEvents", "list", {"runId": "run-1"})
        assert waits() - before == 10


async def test_pool_figures_count_every_node(make_cluster_url: MakeClusterUrl) -> None:
    backend = open_backend(get_plugin_manager(), make_cluster_url(max_connections="7"))
    assert isinstance(backend, RedisBackend)
    await backend.start(migrate=True)
    try:
        assert backend.run_events is not None
        await backend.run_events.append(
            "default", {"runId": "r", "eventType": "t", "idempotencyKey": None, "payload": None}
        )
        stats = backend.pool_stats()
        # Seven connections for each node the client knows: the three primaries, and
        # the replicas once CLUSTER SLOTS lists them; none is checked out between calls.
        assert stats.size in (21, 42)
        assert stats.in_use == 0
    finally:
        await backend.close()
