"""Redis-specific guarantees beyond the conformance suite: key hygiene and retention."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import cast

import pytest
import redis

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance.harness import StoreClient, agent, list_all, run
from bridge_store.errors import BackendUnreachable, ConfigurationError
from bridge_store_redis.keys import KeySpace
from bridge_store_redis.settings import parse_url
from testkit.services import REDIS_URL, free_port
from tests.support.redis import MakeRedisUrl, RedisServer, store_client

pytestmark = pytest.mark.redis


def dump(client: redis.Redis) -> dict[bytes, bytes]:
    """Every key of the server with everything it holds, as one blob per key."""
    contents: dict[bytes, bytes] = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        parts: list[bytes]
        if kind == b"hash":
            fields = cast("dict[bytes, bytes]", client.hgetall(key))
            parts = [part for item in fields.items() for part in item]
        elif kind == b"zset":
            parts = cast("list[bytes]", client.zrange(key, 0, -1))
        elif kind == b"string":
            parts = [cast("bytes", client.get(key))]
        else:
            raise AssertionError(f"unexpected {kind!r} key {key!r}")
        contents[key] = b"\x1f".join(parts)
    return contents


async def populate(client: StoreClient, agent_id: str, cwd: str) -> list[str]:
    """An agent with two runs, their events and checkpoint blobs; returns the run ids."""
    await client.call("agents", "create", {"agent": agent(agent_id, cwd=cwd)})
    run_ids = [f"{agent_id}-run-{turn}" for turn in (1, 2)]
    for turn, run_id in enumerate(run_ids, start=1):
        await client.call("runs", "create", {"run": run(run_id, agent_id, turn_number=turn)})
        for index in range(3):
            await client.call(
                "runEvents",
                "append",
                {"runId": run_id, "eventType": "t", "idempotencyKey": f"{run_id}-key-{index}"},
            )
        blob = base64.b64encode(f"state of {run_id}".encode()).decode()
        await client.call(
            "checkpoints", "create", {"agentId": agent_id, "blobId": f"{run_id}-blob", "data": blob}
        )
    return run_ids


async def delete_agent_like_the_bridge(client: StoreClient, agent_id: str) -> None:
    """The calls the bridge makes to delete an agent (CONTRACT.md, last paragraph)."""
    runs = await list_all(client, "runs", {"agentIds": [agent_id]})
    run_ids = [item["runId"] for item in runs]
    await client.call("runs", "delete", {"filter": {"agentIds": [agent_id]}})
    await client.call("runEvents", "delete", {"filter": {"runIds": run_ids}})
    await client.call("checkpoints", "delete", {"filter": {"agentIds": [agent_id]}})
    await client.call("agents", "delete", {"filter": {"agentIds": [agent_id]}})


async def test_every_key_has_the_prefix_and_a_deleted_agent_leaves_nothing(
    redis_server: RedisServer,
) -> None:
    # A private server: every key in it is one this backend wrote.
    prefix = "team-a/prod"
    async with store_client(f"{redis_server.url}?prefix={prefix}") as client:
        gone_runs = await populate(client, "agent-gone", "/work/a")
        kept_runs = await populate(client, "agent-kept", "/work/a")
        with redis_server.client() as raw:
            tags = tuple(KeySpace(prefix).tag(name).encode() for name in ("agents", "runs"))
            keys = list(dump(raw))
            assert keys
            assert all(key.startswith(b"{" + prefix.encode() + b":") for key in keys), keys
            assert any(key.startswith(tags) for key in keys)

            await delete_agent_like_the_bridge(client, "agent-gone")
            contents = dump(raw)
            for key, value in contents.items():
                for ident in ["agent-gone", *gone_runs]:
                    assert ident.encode() not in key, key
                    assert ident.encode() not in value, (key, value)
            # ...while the other agent is whole.
            assert any(b"agent-kept" in value for value in contents.values())
            assert (await client.call("runEvents", "list", {"runId": kept_runs[1]}))["items"]

            await delete_agent_like_the_bridge(client, "agent-kept")
            assert dump(raw) == {}


async def test_deletes_by_filter_leave_no_index_entries(redis_server: RedisServer) -> None:
    async with store_client(redis_server.url) as client:
        for index in range(1200):  # more than one delete batch
            cwd = "/work/x" if index % 2 else "/work/y"
            await client.call("agents", "create", {"agent": agent(f"a{index}", cwd=cwd)})
        await client.call("agents", "delete", {"filter": {"cwd": "/work/x"}})
        assert len(await list_all(client, "agents", {"limit": 1000})) == 600
        assert len(await list_all(client, "agents", {"cwd": "/work/y", "limit": 1000})) == 600
        await client.call("agents", "delete", {"filter": {}})
        with redis_server.client() as raw:
            assert dump(raw) == {}


async def test_an_update_moves_every_index_entry(redis_server: RedisServer) -> None:
    async with store_client(redis_server.url) as client:
        await client.call("agents", "create", {"agent": agent("a1", cwd="/old", updated_at=1)})
        await client.call("agents", "update", {"agent": agent("a1", cwd="/new", updated_at=2)})
        assert await client.call("agents", "list", {"filter": {"cwd": "/old"}}) == {"items": []}
        [moved] = (await client.call("agents", "list", {"filter": {"cwd": "/new"}}))["items"]
        assert moved["updatedAt"] == 2
        # A delete filtered by the old cwd no longer matches the agent.
        await client.call("agents", "delete", {"filter": {"agentIds": ["a1"], "cwd": "/old"}})
        assert await client.call("agents", "get", {"agentId": "a1"}) == moved
        with redis_server.client() as raw:
            members = {key: value for key, value in dump(raw).items() if b":by-" in key}
            assert not any(b"/old" in value for value in members.values())


# -- retention ---------------------------------------------------------------------------


async def test_retention_sets_a_ttl_refreshed_by_each_append(
    make_redis_url: MakeRedisUrl,
) -> None:
    url = make_redis_url(run_events_ttl="3600")
    keys = KeySpace(parse_url(url).prefix)
    async with store_client(url) as client:
        await client.call(
            "runEvents", "append", {"runId": "r", "eventType": "t", "idempotencyKey": "k"}
        )
        with redis.Redis.from_url(REDIS_URL) as raw:
            raw.pexpire(keys.event_log("r"), 5000)
            await client.call("runEvents", "append", {"runId": "r", "eventType": "t"})
            for key in (keys.event_log("r"), keys.event_keys("r")):
                assert 3_500_000 < raw.pttl(key) <= 3_600_000
            [(member, expires_at)] = raw.zrange(keys.event_runs(), 0, -1, withscores=True)
            assert member == b"r"
            now_ms = raw.time()[0] * 1000
            assert now_ms + 3_500_000 < expires_at <= now_ms + 3_601_000


async def test_logs_expire_and_leave_the_registry(make_redis_url: MakeRedisUrl) -> None:
    url = make_redis_url(run_events_ttl="1")
    async with store_client(url) as client:
        await client.call(
            "runEvents", "append", {"runId": "old", "eventType": "t", "idempotencyKey": "k"}
        )
        await asyncio.sleep(1.2)
        assert await client.call("runEvents", "list", {"runId": "old"}) == {"items": []}
        # The key is free again and the log starts over, as after a delete.
        again = await client.call(
            "runEvents", "append", {"runId": "old", "eventType": "t", "idempotencyKey": "k"}
        )
        assert again["seq"] == 1
        await asyncio.sleep(1.2)
        await client.call("runEvents", "append", {"runId": "new", "eventType": "t"})
    with redis.Redis.from_url(REDIS_URL) as raw:
        # The expired log's registry entry was pruned by the next append.
        assert raw.zrange(KeySpace(parse_url(url).prefix).event_runs(), 0, -1) == [b"new"]


async def test_a_server_without_retention_keeps_logs_forever(
    make_redis_url: MakeRedisUrl,
) -> None:
    with_ttl = make_redis_url(run_events_ttl="60")
    without_ttl = with_ttl.replace("&run_events_ttl=60", "")
    assert parse_url(without_ttl).run_events_ttl is None
    keys = KeySpace(parse_url(with_ttl).prefix)
    async with store_client(with_ttl) as client:
        await client.call(
            "runEvents", "append", {"runId": "r", "eventType": "t", "idempotencyKey": "k"}
        )
    async with store_client(without_ttl) as client:
        await client.call("runEvents", "append", {"runId": "r", "eventType": "t"})
    with redis.Redis.from_url(REDIS_URL) as raw:
        assert raw.pttl(keys.event_log("r")) == -1
        assert raw.pttl(keys.event_keys("r")) == -1
        assert raw.zscore(keys.event_runs(), "r") == float("inf")


async def test_a_redis_that_evicts_any_key_is_refused(redis_server: RedisServer) -> None:
    backend = open_backend(get_plugin_manager(), redis_server.url)
    with redis_server.client() as admin:
        admin.config_set("maxmemory-policy", "allkeys-lru")
        with pytest.raises(ConfigurationError, match="noeviction"):
            await backend.start(migrate=True)
        # Evicting only keys with a TTL can only shorten retention of event logs.
        admin.config_set("maxmemory-policy", "volatile-lru")
        await backend.start(migrate=True)
    await backend.close()


async def test_rediss_talks_tls_and_checks_the_certificate(tmp_path: Path) -> None:
    server = RedisServer(port=free_port(), directory=tmp_path, tls=True)
    server.start()
    try:
        async with store_client(f"{server.url}&prefix=tls") as client:
            await client.call("agents", "create", {"agent": agent("a1")})
            assert (await client.call("agents", "get", {"agentId": "a1"}))["agentId"] == "a1"
        # Without the CA the self-signed certificate is refused (a start-up mistake,
        # said with the fix); plain TCP gets no answer (a server that seems down).
        without_ca = f"rediss://127.0.0.1:{server.port}/0?socket_timeout=1"
        backend = open_backend(get_plugin_manager(), without_ca)
        with pytest.raises(ConfigurationError, match=r"failed the TLS handshake.*ssl_ca_certs"):
            await backend.start(migrate=True)
        await backend.close()
        plain = f"redis://127.0.0.1:{server.port}/0?socket_timeout=1"
        backend = open_backend(get_plugin_manager(), plain)
        with pytest.raises(BackendUnreachable, match="cannot reach Redis"):
            await backend.start(migrate=True)
        await backend.close()
    finally:
        server.stop()
