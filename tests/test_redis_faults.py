"""Redis outages surface as `unavailable` and heal without restarting the store.

These tests stop and start private redis-server processes (or point at ports they
control); the machine's Redis is shared and never touched.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance.harness import StoreClient, agent
from bridge_store.errors import BackendUnreachable, Code, ConnectError
from testkit.services import free_port
from tests.support.redis import RedisServer, store_client

pytestmark = pytest.mark.redis

EVENT = {"runId": "r", "eventType": "t"}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a hung Redis)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


async def test_start_with_nothing_listening_is_unavailable() -> None:
    # Refused at start: a start-up error that may mend itself (serve exits 3); a call
    # made all the same is unavailable.
    backend = open_backend(get_plugin_manager(), f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(BackendUnreachable, match=r"cannot reach Redis at 127\.0\.0\.1:"):
        await backend.start(migrate=True)
    assert backend.agents is not None
    with pytest.raises(ConnectError) as caught:
        await backend.agents.get("default", "a1")
    assert caught.value.code == Code.UNAVAILABLE
    await backend.close()


async def test_a_hung_redis_times_out_as_unavailable(silent_port: int) -> None:
    url = f"redis://127.0.0.1:{silent_port}/0?socket_timeout=0.2&socket_connect_timeout=0.2"
    backend = open_backend(get_plugin_manager(), url)
    assert backend.run_events is not None
    with pytest.raises(ConnectError) as caught:
        await backend.run_events.append(
            "default", {**EVENT, "idempotencyKey": None, "payload": None}
        )
    assert caught.value.code == Code.UNAVAILABLE
    await backend.close()


async def call_or_unavailable(client: StoreClient, substore: str, method: str, data: Any) -> Any:
    """The call's result; an `unavailable` first attempt is retried once.

    After connections are cut, the first call may still pick a pooled connection
    whose end has not yet seen the close; it fails with `unavailable` and is dropped.
    """
    try:
        return await client.call(substore, method, data)
    except ConnectError as error:
        if error.code != Code.UNAVAILABLE:
            raise
        return await client.call(substore, method, data)


async def test_redis_restart_is_survived_without_restarting_the_store(
    redis_server: RedisServer,
) -> None:
    async with store_client(redis_server.url) as client:
        await client.call("agents", "create", {"agent": agent("a1")})
        await client.call("runEvents", "append", EVENT)

        redis_server.stop()
        for substore, method, data in [
            ("agents", "get", {"agentId": "a1"}),
            ("agents", "create", {"agent": agent("a2")}),
            ("runEvents", "append", EVENT),
            ("runEvents", "list", {"runId": "r"}),
            ("checkpoints", "list", {}),
        ]:
            error = await client.error(substore, method, data)
            assert error.code == Code.UNAVAILABLE, (substore, method, error)
            assert "Redis is unavailable" in error.message

        # Same port, empty data set, and an empty script cache: calls by SHA must
        # reload their scripts on their own.
        redis_server.start()
        assert await call_or_unavailable(client, "agents", "get", {"agentId": "a1"}) is None
        created = await client.call("agents", "create", {"agent": agent("a1")})
        assert created["agentId"] == "a1"
        appended = await client.call("runEvents", "append", EVENT)
        assert appended["seq"] == 1
        assert (await client.call("runEvents", "list", {"runId": "r"}))["items"] == [appended]


async def test_killed_connections_are_replaced(redis_server: RedisServer) -> None:
    prefix = "kill-me"
    async with store_client(f"{redis_server.url}?prefix={prefix}") as client:
        await client.call("agents", "create", {"agent": agent("a1")})
        with redis_server.client() as admin:
            killed = admin.client_kill_filter(_type="normal", skipme=True)
            assert killed >= 1
        stored = await call_or_unavailable(client, "agents", "get", {"agentId": "a1"})
        assert stored == agent("a1")
        await client.call("runEvents", "append", EVENT)


async def test_a_full_redis_is_resource_exhausted(redis_server: RedisServer) -> None:
    async with store_client(redis_server.url) as client:
        await client.call("agents", "create", {"agent": agent("a1")})
        with redis_server.client() as admin:
            admin.config_set("maxmemory", "1")
            try:
                for substore, method, data in [
                    ("agents", "create", {"agent": agent("a2")}),
                    ("runEvents", "append", EVENT),
                    ("checkpoints", "create", {"agentId": "a", "blobId": "b", "data": ""}),
                ]:
                    error = await client.error(substore, method, data)
                    assert error.code == Code.RESOURCE_EXHAUSTED, (substore, error)
                # Reads still work.
                assert (await client.call("agents", "get", {"agentId": "a1"}))["agentId"] == "a1"
            finally:
                admin.config_set("maxmemory", "0")
        await client.call("agents", "create", {"agent": agent("a2")})


async def test_a_read_only_replica_is_unavailable(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    replica = RedisServer(port=free_port(), directory=tmp_path / "replica")
    replica.directory.mkdir()
    replica.start()
    try:
        with replica.client() as admin:
            admin.replicaof("127.0.0.1", str(redis_server.port))
        async with store_client(replica.url) as client:
            error = await client.error("agents", "create", {"agent": agent("a1")})
            assert error.code == Code.UNAVAILABLE
            assert "read-only" in error.message
            assert await client.call("agents", "get", {"agentId": "a1"}) is None
    finally:
        replica.stop()
