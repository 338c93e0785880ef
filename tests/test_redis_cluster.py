"""The key layout obeys Redis Cluster: the conformance suite on a node that owns only
the slots of one prefix's substores (four per tenant).

The second node of the cluster owns every other slot, so any key without the
prefix's hash tags would answer MOVED, any script touching an undeclared key of
another slot would fail with "non local key", and any script declaring keys of two
slots would fail with CROSSSLOT. The backend connects to the first node only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import MovedError

from bridge_store.backend.substores import SUBSTORE_NAMES
from bridge_store.conformance import StoreConformance
from bridge_store.conformance.tenants import TENANTS_USED
from bridge_store_redis.keys import KeySpace, utf8
from tests.support.redis import RedisServer, start_cluster

pytestmark = pytest.mark.redis

PREFIX = "cluster-check"
KEYS = KeySpace(PREFIX)
#: The slots of every substore of every tenant the conformance suite writes to.
SLOTS = sorted(
    {
        key_slot(utf8(KEYS.of_tenant(tenant).tag(name)))
        for name in SUBSTORE_NAMES
        for tenant in TENANTS_USED
    }
)
ELSEWHERE = "elsewhere"


@pytest.fixture(scope="module")
def cluster_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    first, second = start_cluster(Path(tmp_path_factory.mktemp("cluster")), SLOTS)
    try:
        yield first
    finally:
        first.stop()
        second.stop()


def test_the_cluster_refuses_what_the_layout_avoids(cluster_node: RedisServer) -> None:
    assert len(SLOTS) == 4 * len(TENANTS_USED)
    assert key_slot(utf8(ELSEWHERE)) not in SLOTS
    agents = KEYS.table("agents", ("updated",)).docs
    with cluster_node.client() as client:
        client.set(agents, 1)
        with pytest.raises(MovedError):
            client.set(ELSEWHERE, 1)
        with pytest.raises(redis.ResponseError, match="non local key"):
            client.eval(f"redis.call('SET', '{ELSEWHERE}', 1)", 1, agents)
        with pytest.raises(redis.ResponseError, match="hash to the same slot"):
            client.eval("return 1", 2, agents, KEYS.event_runs())
        client.delete(agents)


class TestRedisOnAClusterNode(StoreConformance):
    @pytest.fixture
    def store_url(self, cluster_node: RedisServer) -> str:
        with cluster_node.client() as client:
            client.flushall()
        return f"{cluster_node.url}?prefix={PREFIX}"
