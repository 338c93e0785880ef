"""The Redis Cluster client (``redis+cluster://``): redis-py's asyncio cluster client,
with every command bounded and, with ``wait_replicas``, every write replicated.

redis-py follows MOVED and ASK redirections and TRYAGAIN by itself (the command did
not run, so asking again is safe) and refreshes its map of the slots when a node
fails. What it would also retry, a command whose connection broke, is not retried
here, for the reason no connection of this backend is
(``RedisSettings.connection_options``): an append whose reply was lost may have run.
Such failures answer ``unavailable`` and the next call finds the new topology.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.exceptions import AskError, ClusterError, MovedError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge_store.substores import BackendOptions

from .errors import NotReplicated
from .scripts import READ_RANGES
from .settings import RedisSettings

#: The commands bridge-store writes with; WAIT follows each when ``wait_replicas`` is set.
_WRITES = frozenset({"EVALSHA", "SET", "DEL", "UNLINK"})
#: The one script that only reads.
_READ_ONLY_SHA = hashlib.sha1(READ_RANGES.encode(), usedforsecurity=False).hexdigest()
#: Pause before asking again for a slot that moved or is being migrated.
_REDIRECT_PAUSE_SECONDS = 0.05


class BoundedCluster(RedisCluster):
    """A cluster client whose every command ends within ``deadline`` seconds, including
    its redirections and topology refreshes, and whose writes are followed by WAIT."""

    def __init__(
        self, *, deadline: float, wait_replicas: int, max_connections: int, **kwargs: Any
    ) -> None:
        super().__init__(max_connections=max_connections, **kwargs)
        # redis-py's cluster pools fail at once when a node's pool is exhausted; callers
        # wait for a turn here instead, as on the standalone client's blocking pool. A
        # command holds at most one connection per node, so no node's pool runs out.
        self._turns = asyncio.Semaphore(max_connections)
        self._deadline = deadline
        self._wait_replicas = wait_replicas
        # Half the deadline: WAIT answers (with too few replicas) before the call's
        # deadline cuts it off, so the caller learns why.
        self._wait_ms = max(1, int(deadline * 500))

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with asyncio.timeout(self._deadline), self._turns:
            if self._wait_replicas and _is_write(args) and "target_nodes" not in kwargs:
                return await self._write_and_wait(args, kwargs)
            return await super().execute_command(*args, **kwargs)

    async def _write_and_wait(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a write and WAIT on one connection of the slot's primary.

        WAIT counts the replicas that have the writes of the connection it is sent on,
        so both go in one pipeline to one node.
        """
        key = args[3] if args[0] == "EVALSHA" else args[1]
        while True:
            if self._initialize:
                await self.initialize()
            node: ClusterNode = self.get_node_from_key(key)  # type: ignore[assignment]
            pipe = self.pipeline()
            pipe.execute_command(*args, target_nodes=node, **kwargs)
            pipe.execute_command("WAIT", self._wait_replicas, self._wait_ms, target_nodes=node)
            try:
                result, replicas = await pipe.execute(
                    raise_on_error=False, allow_redirections=False
                )
            except (RedisConnectionError, RedisTimeoutError):
                # As redis-py does: the next command maps the cluster again first.
                self._initialize = True
                raise
            except ClusterError:
                await self.aclose()
                raise
            if isinstance(result, MovedError):
                # The write did not run: its slot has a new primary (a failover).
                await self.nodes_manager.move_slot(result)
                continue
            if isinstance(result, AskError | TryAgainError):
                # The write did not run: the slot is being migrated. Ask again later.
                await asyncio.sleep(_REDIRECT_PAUSE_SECONDS)
                continue
            if isinstance(result, ClusterError):
                await self.aclose()
            if isinstance(result, Exception):
                raise result
            if isinstance(replicas, Exception):
                raise replicas
            if replicas < self._wait_replicas:
                raise NotReplicated(
                    f"a write reached {replicas} of the {self._wait_replicas} replicas "
                    f"wait_replicas asks for within {self._wait_ms} ms"
                )
            return result


def _is_write(args: tuple[Any, ...]) -> bool:
    name = str(args[0]).upper()
    return name in _WRITES and not (name == "EVALSHA" and args[1] == _READ_ONLY_SHA)


def cluster_client(settings: RedisSettings, options: BackendOptions) -> BoundedCluster:
    """A client of the cluster the settings' seed nodes belong to (opens no connection)."""
    return BoundedCluster(
        deadline=settings.socket_timeout,
        wait_replicas=settings.wait_replicas,
        startup_nodes=[ClusterNode(host, port) for host, port in settings.nodes],
        # Without retry of a command whose connection failed (see the module docstring).
        **settings.connection_options(options),
    )
