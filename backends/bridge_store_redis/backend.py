"""The Redis backend: one client (a connection pool, or a cluster client with a pool per
node), the scripts, the four substores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.connection import Connection, SSLConnection
from redis.exceptions import RedisClusterException, RedisError

from bridge_store.backend.features import QueuedRun
from bridge_store.backend.substores import BackendOptions, PoolStats
from bridge_store.errors import ConfigurationError

from .agents import RedisAgents
from .checkpoints import RedisCheckpoints
from .cluster import BoundedCluster, cluster_client
from .errors import redis_errors, startup_error
from .events import RedisRunEvents
from .export_queue import RedisExportQueue
from .keys import KeySpace
from .leases import RedisLeases
from .pool import QuickBlockingPool
from .runs import RedisRuns
from .scripts import Scripts
from .settings import RedisSettings


def _client(settings: RedisSettings, options: BackendOptions) -> Redis:
    tls: dict[str, Any] = dict(settings.tls_options)
    # Waits for a free connection like redis-py's blocking pool, cheaper when none do.
    pool = QuickBlockingPool(
        connection_class=SSLConnection if settings.tls else Connection,
        host=settings.host,
        port=settings.port,
        db=settings.db,
        # How long a call waits for a free pooled connection before `unavailable`.
        timeout=settings.socket_timeout,
        **settings.connection_options(options),
        **tls,
    )
    return Redis(connection_pool=pool)


class RedisBackend:
    """Every substore in one Redis database (or one Redis Cluster), under one key prefix."""

    def __init__(self, settings: RedisSettings, options: BackendOptions | None = None) -> None:
        self.settings = settings
        self.keys = KeySpace(settings.prefix, spread=settings.cluster)
        # Creating the client opens no connection; the first command does.
        options = options or BackendOptions()
        self._client: Redis | RedisCluster = (
            cluster_client(settings, options) if settings.cluster else _client(settings, options)
        )
        self._scripts = Scripts(self._client)
        self.agents = RedisAgents(self._client, self.keys, self._scripts)
        self.runs = RedisRuns(self._client, self.keys, self._scripts)
        self.run_events = RedisRunEvents(
            self._client, self.keys, self._scripts, ttl_seconds=settings.run_events_ttl
        )
        self.checkpoints = RedisCheckpoints(self._client, self.keys, self._scripts)
        self._leases = RedisLeases(self._client, self.keys)
        self._export_queue = RedisExportQueue(self._client, self.keys)

    async def start(self, *, migrate: bool) -> None:
        """Check that Redis answers and may hold the data, and load the scripts.

        There is no schema to migrate. What stops the start is said in one line with
        the fix (:func:`.errors.startup_error`).
        """
        where = f"Redis at {self.settings.host}:{self.settings.port}"
        if self.settings.cluster:
            where = "the Redis Cluster at " + ",".join(f"{h}:{p}" for h, p in self.settings.nodes)
        try:
            for memory in await self._memory_infos():
                policy = str(memory.get("maxmemory_policy", "noeviction"))
                if policy.startswith("allkeys-"):
                    # Evicting a document, an index or a log without the others
                    # corrupts the store silently; refusing to start is the only safe
                    # answer.
                    raise ConfigurationError(
                        f"{where} evicts any key when full (maxmemory-policy {policy}); "
                        "set it to noeviction for bridge-store"
                    )
            await self._scripts.load()
        except (RedisError, RedisClusterException) as error:
            raise startup_error(where, self.settings.db, error) from error

    async def _memory_infos(self) -> list[dict[str, Any]]:
        """``INFO memory`` of the server, or of each primary of the cluster."""
        client = self._client
        if isinstance(client, RedisCluster):
            await client.initialize()
            return [
                await client.info("memory", target_nodes=node) for node in client.get_primaries()
            ]
        return [await client.info("memory")]

    async def close(self) -> None:
        if isinstance(self._client, BoundedCluster):
            await self._client.close_connections()
        else:
            await self._client.aclose()
        if isinstance(self._client, Redis):
            await self._client.connection_pool.disconnect()

    async def upgrade_schema(self) -> None:
        """Redis keeps no schema."""

    async def schema_revision(self) -> str | None:
        return None

    @redis_errors
    async def readiness(self) -> str | None:
        """PING: the server answers on a pooled connection."""
        await self._client.ping()
        return None

    def pool_stats(self) -> PoolStats:
        if isinstance(self._client, RedisCluster):
            # Per node: redis-py keeps every connection it made and the idle ones.
            nodes = self._client.get_nodes()
            busy = sum(len(n._connections) - len(n._free) for n in nodes)
            return PoolStats(size=self.settings.max_connections * len(nodes), in_use=busy)
        pool = self._client.connection_pool
        # redis-py has no public count of checked-out connections across its versions
        # (get_connection_count is 7.x and later); its pools have kept this set since 4.x.
        in_use = len(getattr(pool, "_in_use_connections", ()))
        return PoolStats(size=self.settings.max_connections, in_use=in_use)

    async def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        """``SET NX PX``, or a renewal by the same holder (leases.py)."""
        return await self._leases.acquire(name, holder, seconds)

    async def release_lease(self, name: str, holder: str) -> None:
        await self._leases.release(name, holder)

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        """One sorted set scored by the time queued (export_queue.py)."""
        await self._export_queue.queue_runs(runs)

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        return await self._export_queue.queued_runs(limit)

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        await self._export_queue.unqueue_runs(runs)

    async def queued_count(self) -> int:
        return await self._export_queue.queued_count()
