"""``redis+cluster://`` start-up problems and outages, without a cluster: nothing
listening, a node that never answers, a standalone Redis given as a cluster node; and
every failure a cluster reports during a failover answers ``unavailable``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    MasterDownError,
    MaxConnectionsError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.errors import BackendUnreachable, Code, ConfigurationError, ConnectError
from bridge_store_redis.errors import NotReplicated, redis_errors
from testkit.services import free_port
from tests.support.redis import RedisServer

pytestmark = pytest.mark.redis

EVENT = {"runId": "r", "eventType": "t", "idempotencyKey": None, "payload": None}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a hung node)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


async def test_start_with_no_node_listening_is_unreachable_then_unavailable() -> None:
    url = f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/"
    backend = open_backend(get_plugin_manager(), url)
    with pytest.raises(BackendUnreachable, match=r"cannot reach the Redis Cluster at 127"):
        await backend.start(migrate=True)
    assert backend.run_events is not None
    with pytest.raises(ConnectError) as caught:
        await backend.run_events.append("default", EVENT)
    assert caught.value.code == Code.UNAVAILABLE
    await backend.close()


async def test_a_hung_node_is_unavailable_within_the_socket_timeout(silent_port: int) -> None:
    url = f"redis+cluster://127.0.0.1:{silent_port}/?socket_timeout=0.3"
    backend = open_backend(get_plugin_manager(), url)
    assert backend.run_events is not None
    started = time.monotonic()
    with pytest.raises(ConnectError) as caught:
        await backend.run_events.append("default", EVENT)
    assert caught.value.code == Code.UNAVAILABLE
    # The whole call, topology discovery included, is bounded.
    assert time.monotonic() - started < 1.0
    await backend.close()


async def test_a_standalone_redis_given_as_a_cluster_says_which_scheme_to_use(
    redis_server: RedisServer,
) -> None:
    backend = open_backend(get_plugin_manager(), f"redis+cluster://127.0.0.1:{redis_server.port}")
    with pytest.raises(ConfigurationError, match=r"is not a Redis Cluster.*use redis://") as caught:
        await backend.start(migrate=True)
    assert "\n" not in str(caught.value)
    await backend.close()


@pytest.mark.parametrize(
    "error",
    [
        ClusterDownError("CLUSTERDOWN The cluster is down"),
        MasterDownError("MASTERDOWN Link with MASTER is down"),
        TryAgainError("TRYAGAIN Multiple keys request during rehashing of slot"),
        ClusterError("TTL exhausted."),
        SlotNotCoveredError('Slot "42" is not covered by the cluster.'),
        RedisClusterException("Redis Cluster cannot be connected. Please provide ..."),
        RedisClusterException("All slots are not covered after query all startup_nodes."),
        MaxConnectionsError("Too many connections"),
        NotReplicated("a write reached 0 of the 1 replicas"),
        TimeoutError(),
    ],
    ids=lambda error: type(error).__name__,
)
async def test_cluster_failures_are_unavailable(error: Exception) -> None:
    @redis_errors
    async def call() -> None:
        raise error

    with pytest.raises(ConnectError) as caught:
        await call()
    assert caught.value.code == Code.UNAVAILABLE


async def test_misuse_of_the_cluster_client_stays_a_bug() -> None:
    @redis_errors
    async def call() -> None:
        raise RedisClusterException("No way to dispatch this command to Redis Cluster.")

    with pytest.raises(RedisClusterException):
        await call()
