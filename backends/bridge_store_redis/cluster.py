"""The Redis Cluster client (``redis+cluster://``): redis-py's asyncio cluster client,
with every command bounded and, with ``wait_replicas``, every write replicated.

redis-py follows MOVED and ASK redirections and TRYAGAIN by itself (the command did
not run, so asking again is safe) and refreshes its map of the slots when a node
fails. What it would also retry, a command whose connection broke, is not retried
here, for the reason no connection of this backend is
(``RedisSettings.connection_options``): an append whose reply was lost may have run.
Such failures answer ``unavailable`` and the next call finds the new topology.

Two symptoms of a failover would otherwise escape as ``internal``. A promoted replica
has an empty script cache (Redis does not replicate ``SCRIPT LOAD``), so a script
answers NOSCRIPT and did not run; redis-py's fallback loads it on the primaries the
client knows of, which can miss the new one, so it is loaded here on the node the slot
map names and sent again. And a primary demoted while a WAIT blocks answers that WAIT
with ``UNBLOCKED ... (master -> replica?)``: the write ran, but whether a replica has
it is unknown, so it is :class:`~.errors.NotReplicated`, which answers ``unavailable``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import Connection
from redis.exceptions import (
    AskError,
    ClusterError,
    MovedError,
    NoScriptError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge_store.backend.substores import BackendOptions

from .errors import NotReplicated
from .scripts import ALL, READ_BLOB, READ_RANGES
from .settings import RedisSettings

#: The commands bridge-store writes with; WAIT follows each when ``wait_replicas`` is set.
_WRITES = frozenset({"EVALSHA", "SET", "DEL", "UNLINK"})
#: The scripts that only read.
_READ_ONLY_SHAS = frozenset(
    hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
    for source in (READ_RANGES, READ_BLOB)
)
#: Every script's source by its SHA, to load one on a node whose cache lacks it.
_SOURCES = {
    hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest(): source for source in ALL
}
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
            if "target_nodes" in kwargs:
                return await super().execute_command(*args, **kwargs)
            if self._wait_replicas and _is_write(args):
                return await self._write_and_wait(args, kwargs)
            while True:
                try:
                    return await super().execute_command(*args, **kwargs)
                except NoScriptError:
                    if args[0] != "EVALSHA":
                        raise
                # The script did not run: its slot's primary lacks it. redis-py's
                # fallback loads it on the primaries the client knows of, which misses
                # a promoted replica the client has not heard of yet; load it on the
                # node the slot map names (after a MOVED, the new primary).
                await self._load_script(str(args[1]), self._primary_of(args[3]))

    @asynccontextmanager
    async def connection_to(self, key: bytes) -> AsyncIterator[Connection]:
        """A connection to the primary of ``key``'s slot, the caller's alone until the
        block ends (a turn taken, as for a command); closed if the block fails, as it
        may then hold replies nobody read."""
        async with self._turns:
            if self._initialize:
                await self.initialize()
            node = self._primary_of(key)
            connection = node.acquire_connection()
            try:
                await node.disconnect_if_needed(connection)
                yield connection
            except BaseException:
                await connection.disconnect()
                raise
            finally:
                node.release(connection)

    async def aclose(self) -> None:
        """Have the next command map the cluster again; close only idle connections.

        redis-py calls this to re-map the cluster after CLUSTERDOWN, an uncovered slot
        or many MOVEDs, and this class after a ClusterError; both are failover
        symptoms, while other calls are in flight. redis-py's own ``aclose`` closes
        every connection then, the ones in use too, which breaks those calls deep in
        redis-py (an AttributeError on a writer set to None) and answers them
        ``internal``. In-use connections are instead marked to reconnect after their
        command; :meth:`close_connections` closes everything.
        """
        self._initialize = True
        for node in self.get_nodes():
            node.update_active_connections_for_reconnect()
            await node.disconnect_free_connections()

    async def close_connections(self) -> None:
        """Close every connection (the backend's close), also while a re-map is pending."""
        self._initialize = False
        await super().aclose()

    async def _write_and_wait(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a write and WAIT on one connection of the slot's primary.

        WAIT counts the replicas that have the writes of the connection it is sent on,
        so both go in one pipeline to one node.
        """
        key = args[3] if args[0] == "EVALSHA" else args[1]
        while True:
            if self._initialize:
                await self.initialize()
            node = self._primary_of(key)
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
            if isinstance(result, NoScriptError) and args[0] == "EVALSHA":
                # The write did not run: the node (a promoted replica) lacks the script.
                await self._load_script(str(args[1]), node)
                continue
            if isinstance(result, ClusterError):
                await self.aclose()
            if isinstance(result, Exception):
                raise result
            if isinstance(replicas, Exception):
                # A demoted primary answers UNBLOCKED: map the cluster again first.
                self._initialize = True
                raise NotReplicated(
                    f"a write ran but its replicas could not be counted "
                    f"({type(replicas).__name__}: {replicas})"
                ) from None
            if replicas < self._wait_replicas:
                raise NotReplicated(
                    f"a write reached {replicas} of the {self._wait_replicas} replicas "
                    f"wait_replicas asks for within {self._wait_ms} ms"
                )
            return result

    def _primary_of(self, key: Any) -> ClusterNode:
        node = self.get_node_from_key(key)
        if node is None:
            raise SlotNotCoveredError(f"no primary holds the slot of {key!r} now")
        return node

    async def _load_script(self, sha: str, node: ClusterNode) -> None:
        source = _SOURCES.get(sha)
        if source is None:
            raise NoScriptError(f"no script of bridge-store has the SHA {sha}")
        # Past this class's execute_command: the caller holds a turn already.
        await super().execute_command("SCRIPT LOAD", source, target_nodes=node)


def _is_write(args: tuple[Any, ...]) -> bool:
    name = str(args[0]).upper()
    return name in _WRITES and not (name == "EVALSHA" and args[1] in _READ_ONLY_SHAS)


def cluster_client(settings: RedisSettings, options: BackendOptions) -> BoundedCluster:
    """A client of the cluster the settings' seed nodes belong to (opens no connection)."""
    return BoundedCluster(
        deadline=settings.socket_timeout,
        wait_replicas=settings.wait_replicas,
        startup_nodes=[ClusterNode(host, port) for host, port in settings.nodes],
        # Without retry of a command whose connection failed (see the module docstring).
        **settings.connection_options(options),
    )
