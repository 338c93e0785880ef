"""A private Redis Cluster: 3 primaries with a replica each, on free loopback ports.

``RedisCluster.start`` runs six ``redis-server --cluster-enabled yes`` (nothing saved)
in a temporary directory and joins them with ``redis-cli --cluster create
--cluster-replicas 1``; tests build one per module (the ``redis_cluster`` fixture,
module-scoped where a test module declares it) and each test takes a fresh key
prefix from ``make_cluster_url``. The machine's shared Redis is never touched.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pytest

from testkit.services import free_port, new_redis_prefix
from tests.support.redis import START_TIMEOUT_SECONDS, RedisServer

if TYPE_CHECKING:
    import redis

NODES = 6
#: A failover, or the cluster settling after one, takes a few node timeouts.
SETTLE_TIMEOUT_SECONDS = 30.0

MakeClusterUrl = Callable[..., str]


@dataclass
class RedisCluster:
    servers: list[RedisServer]

    @classmethod
    def start(cls, directory: Path) -> RedisCluster:
        cli = shutil.which("redis-cli")
        if cli is None:
            pytest.fail("redis-cli is not installed")
        servers = [
            RedisServer(port=free_port(), directory=directory / f"node-{n}", cluster=True)
            for n in range(NODES)
        ]
        cluster = cls(servers)
        try:
            for server in servers:
                server.directory.mkdir()
                server.start()
            for server in servers:
                with server.client() as client:
                    # A node the test stops is noticed within a second, not 15.
                    client.config_set("cluster-node-timeout", 1000)
            addresses = [f"127.0.0.1:{server.port}" for server in servers]
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *addresses,
                    "--cluster-replicas",
                    "1",
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=START_TIMEOUT_SECONDS,
            )
            cluster.wait_until_settled()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{server.port}" for server in self.servers[:3])
        return f"redis+cluster://{seeds}/"

    def store_url(self, prefix: str, **params: str) -> str:
        return f"{self.url}?{urlencode({'prefix': prefix, **params})}"

    def running(self) -> list[RedisServer]:
        return [server for server in self.servers if server.process is not None]

    def role(self, server: RedisServer) -> str:
        with server.client() as client:
            return str(client.info("replication")["role"])

    def primaries(self) -> list[RedisServer]:
        return [server for server in self.running() if self.role(server) == "master"]

    def replica_of(self, primary: RedisServer) -> RedisServer:
        for server in self.running():
            with server.client() as client:
                info = client.info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == primary.port:
                return server
        raise AssertionError(f"no replica follows the primary on port {primary.port}")

    def owner_of(self, key: bytes | str) -> RedisServer:
        """The primary that holds ``key``'s slot now."""
        with self.primaries()[0].client() as client:
            slot = int(client.execute_command("CLUSTER KEYSLOT", key))
            for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    port = int(primary[1])
                    return next(s for s in self.servers if s.port == port)
        raise AssertionError(f"no primary owns slot {slot}")

    def wait_until_settled(self) -> None:
        """Every running node reports cluster_state:ok, and every primary has its replica
        connected and caught up."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
        while not self._settled():
            if time.monotonic() > deadline:
                raise AssertionError("the Redis Cluster did not settle")
            time.sleep(0.1)

    def _settled(self) -> bool:
        import redis

        try:
            for server in self.running():
                with server.client() as client:
                    if client.cluster("INFO")["cluster_state"] != "ok":
                        return False
            primaries = self.primaries()
            for primary in primaries:
                with primary.client() as client:
                    info = client.info("replication")
                if int(info["connected_slaves"]) < 1 or info["slave0"]["state"] != "online":
                    return False
            return len(primaries) == NODES // 2
        except redis.RedisError:
            return False

    def failover(self, primary: RedisServer, *options: str) -> RedisServer:
        """``CLUSTER FAILOVER`` on ``primary``'s replica; returns the new primary once the
        cluster agrees on it."""
        replica = self.replica_of(primary)
        with replica.client() as client:
            client.execute_command("CLUSTER FAILOVER", *options)
        deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
        while self.role(replica) != "master":
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica on port {replica.port} was not promoted")
            time.sleep(0.05)
        return replica

    def crash(self, primary: RedisServer) -> RedisServer:
        """Kill ``primary`` (SIGKILL: nothing handed over); returns the replica the cluster
        promotes by itself once it finds the primary gone."""
        replica = self.replica_of(primary)
        assert primary.process is not None
        primary.process.kill()
        primary.process.wait(timeout=START_TIMEOUT_SECONDS)
        primary.process = None
        deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
        while self.role(replica) != "master":
            if time.monotonic() > deadline:
                raise AssertionError(f"the replica on port {replica.port} was not promoted")
            time.sleep(0.05)
        return replica

    def restart(self, server: RedisServer) -> None:
        """Start a crashed node again: its nodes file makes it rejoin, as a replica of
        the primary that replaced it; returns once the cluster has settled."""
        server.start()
        self.wait_until_settled()

    def keys_per_primary(self, pattern: str) -> dict[int, int]:
        """How many keys matching ``pattern`` each primary holds, by port."""
        counts: dict[int, int] = {}
        for primary in self.primaries():
            with primary.client() as client:
                counts[primary.port] = sum(1 for _ in client.scan_iter(match=pattern, count=1000))
        return counts

    def client(self) -> redis.RedisCluster:
        import redis

        return redis.RedisCluster(host="127.0.0.1", port=self.servers[0].port)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A private cluster for one test module, stopped at the module's end."""
    cluster = RedisCluster.start(tmp_path_factory.mktemp("redis-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def make_cluster_url(redis_cluster: RedisCluster) -> MakeClusterUrl:
    """Store URLs on the module's cluster, each under a new key prefix."""

    def make(**params: str) -> str:
        return redis_cluster.store_url(new_redis_prefix("cluster"), **params)

    return make
