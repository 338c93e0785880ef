"""Tenant isolation: a token sees and changes its own tenant's items only.

Every test writes the same ids in two tenants (``default`` and ``team-b``) and checks
that each call, whatever its filter, touches the caller's tenant alone. One mixin per
substore; each substore's conformance mixin includes its own.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from bridge_store.errors import Code
from bridge_store.security.auth import Scope

from .base import ConformanceBase
from .harness import StoreClient, agent, list_all, run

OTHER = "team-b"
THIRD = "team-c"
#: Every tenant these tests write to (a Redis Cluster test gives its node their slots).
TENANTS_USED = ("default", OTHER, THIRD)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _blob_ids(client: StoreClient, filter_: dict[str, Any]) -> list[Any]:
    return await list_all(client, "checkpoints", filter_)


class AgentTenantConformance(ConformanceBase):
    """Agents of one tenant are invisible to every other."""

    async def test_same_agent_id_in_two_tenants_is_two_agents(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        mine, theirs = agent("agent-1", name="mine"), agent("agent-1", name="theirs")
        await client.call("agents", "create", {"agent": mine})
        # Not already_exists: the id is free in the other tenant.
        await other.call("agents", "create", {"agent": theirs})
        assert await client.call("agents", "get", {"agentId": "agent-1"}) == mine
        assert await other.call("agents", "get", {"agentId": "agent-1"}) == theirs
        updated = agent("agent-1", name="theirs, updated", updated_at=5000)
        await other.call("agents", "update", {"agent": updated})
        assert await client.call("agents", "get", {"agentId": "agent-1"}) == mine
        assert await other.call("agents", "get", {"agentId": "agent-1"}) == updated

    async def test_agent_get_update_of_another_tenant_see_nothing(
        self, client: StoreClient
    ) -> None:
        await client.call("agents", "create", {"agent": agent("agent-1")})
        other = client.as_tenant(OTHER)
        assert await other.call("agents", "get", {"agentId": "agent-1"}) is None
        await other.expect(Code.NOT_FOUND, "agents", "update", {"agent": agent("agent-1")})
        assert await client.call("agents", "get", {"agentId": "agent-1"}) == agent("agent-1")

    async def test_agent_lists_hold_the_callers_tenant_only(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        for number in range(3):
            await client.call("agents", "create", {"agent": agent(f"mine-{number}")})
        for number in range(4):
            await other.call(
                "agents", "create", {"agent": agent(f"theirs-{number}", cwd="/work/b")}
            )
        assert {a["agentId"] for a in await list_all(client, "agents", {})} == {
            "mine-0",
            "mine-1",
            "mine-2",
        }
        assert len(await list_all(other, "agents", {"limit": 1})) == 4
        assert await list_all(client, "agents", {"cwd": "/work/b"}) == []
        assert await list_all(other, "agents", {"cwd": "/work/a"}) == []

    async def test_agent_deletes_stay_in_the_callers_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        for tenant_client in (client, other):
            for agent_id in ("agent-1", "agent-2", "agent-3"):
                await tenant_client.call("agents", "create", {"agent": agent(agent_id)})
        await other.call("agents", "delete", {"filter": {"agentIds": ["agent-1"]}})
        await other.call(
            "agents", "delete", {"filter": {"cwd": "/work/a", "agentIds": ["agent-2"]}}
        )
        assert len(await list_all(client, "agents", {})) == 3
        # An empty filter deletes every agent of the caller's tenant, and no other.
        await other.call("agents", "delete", {"filter": {}})
        assert await list_all(other, "agents", {}) == []
        assert len(await list_all(client, "agents", {})) == 3
        await client.call("agents", "delete", {"filter": {"cwd": "/work/a"}})
        assert await list_all(client, "agents", {}) == []

    async def test_read_scope_may_get_and_list_only(self, client: StoreClient) -> None:
        await client.call("agents", "create", {"agent": agent("agent-1")})
        reader = client.as_tenant(client.principal.tenant, Scope.READ)
        assert await reader.call("agents", "get", {"agentId": "agent-1"}) == agent("agent-1")
        assert len(await list_all(reader, "agents", {})) == 1
        refused = [
            ("agents", "create", {"agent": agent("agent-2")}),
            ("agents", "update", {"agent": agent("agent-1", name="changed")}),
            ("agents", "delete", {"filter": {}}),
            ("runs", "create", {"run": run("run-1")}),
            ("runEvents", "append", {"runId": "run-1", "eventType": "m"}),
            ("checkpoints", "create", {"agentId": "a", "blobId": "b", "data": ""}),
        ]
        for substore, method, data in refused:
            message = await reader.expect(Code.PERMISSION_DENIED, substore, method, data)
            assert "read" in message
        assert await list_all(client, "agents", {}) == [agent("agent-1")]

    async def test_agent_tenants_lists_those_holding_agents(self, client: StoreClient) -> None:
        await client.as_tenant(OTHER).call("agents", "create", {"agent": agent("agent-1")})
        assert OTHER in await client.stores.agents.tenants()
        assert THIRD not in await client.stores.agents.tenants()


class RunTenantConformance(ConformanceBase):
    """Runs of one tenant are invisible to every other."""

    async def test_runs_are_per_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        await client.call("runs", "create", {"run": run("run-1", status="finished")})
        await other.call("runs", "create", {"run": run("run-1")})
        await other.call("runs", "create", {"run": run("run-2", turn_number=2)})
        mine = await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-1"})
        assert mine["status"] == "finished"
        assert await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-2"}) is None
        await client.expect(Code.NOT_FOUND, "runs", "update", {"run": run("run-2")})
        assert [r["runId"] for r in await list_all(client, "runs", {})] == ["run-1"]
        assert [r["runId"] for r in await list_all(client, "runs", {"agentIds": ["agent-1"]})] == [
            "run-1"
        ]
        assert await list_all(client, "runs", {"runIds": ["run-2"]}) == []
        await other.call("runs", "delete", {"filter": {"runIds": ["run-1"]}})
        await other.call("runs", "delete", {"filter": {}})
        assert await list_all(other, "runs", {}) == []
        assert [r["runId"] for r in await list_all(client, "runs", {})] == ["run-1"]
        await client.call("runs", "delete", {"filter": {"agentIds": ["agent-1"]}})
        assert await list_all(client, "runs", {}) == []


class RunEventTenantConformance(ConformanceBase):
    """Each tenant has its own event logs, seqs and idempotency keys."""

    async def test_event_logs_and_seq_are_per_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        for number in range(3):
            await client.call(
                "runEvents", "append", {"runId": "run-1", "eventType": "m", "payload": number}
            )
        first = await other.call("runEvents", "append", {"runId": "run-1", "eventType": "x"})
        # The other tenant's log of the same run id starts at 1.
        assert (first["seq"], first["offset"]) == (1, "1")
        mine = await client.call("runEvents", "list", {"runId": "run-1"})
        assert [e["payload"] for e in mine["items"]] == [0, 1, 2]
        theirs = await other.call("runEvents", "list", {"runId": "run-1"})
        assert [e["eventType"] for e in theirs["items"]] == ["x"]

    async def test_idempotency_keys_are_per_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        key = {"runId": "run-1", "idempotencyKey": "k1"}
        mine = await client.call("runEvents", "append", {**key, "eventType": "mine"})
        theirs = await other.call("runEvents", "append", {**key, "eventType": "theirs"})
        assert theirs["eventType"] == "theirs"
        again = await other.call("runEvents", "append", {**key, "eventType": "retry"})
        assert again == theirs
        assert await client.call("runEvents", "append", {**key, "eventType": "retry"}) == mine

    async def test_concurrent_appends_of_two_tenants_stay_gapless(
        self, client: StoreClient
    ) -> None:
        other = client.as_tenant(OTHER)
        appends = [
            tenant_client.call("runEvents", "append", {"runId": "run-1", "eventType": "m"})
            for _ in range(40)
            for tenant_client in (client, other)
        ]
        await asyncio.gather(*appends)
        for tenant_client in (client, other):
            page = await tenant_client.call("runEvents", "list", {"runId": "run-1"})
            assert [e["seq"] for e in page["items"]] == list(range(1, 41))

    async def test_event_deletes_stay_in_the_callers_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        for tenant_client in (client, other):
            for run_id in ("run-1", "run-2"):
                await tenant_client.call("runEvents", "append", {"runId": run_id, "eventType": "m"})
        await other.call("runEvents", "delete", {"filter": {"runIds": ["run-1"]}})
        await other.call("runEvents", "delete", {"filter": {}})
        for run_id in ("run-1", "run-2"):
            assert (await other.call("runEvents", "list", {"runId": run_id}))["items"] == []
            assert len((await client.call("runEvents", "list", {"runId": run_id}))["items"]) == 1


class CheckpointTenantConformance(ConformanceBase):
    """Blobs of one tenant are invisible to every other."""

    async def test_blobs_are_per_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        ref = {"agentId": "agent-1", "blobId": "blob-1"}
        await client.call("checkpoints", "create", {**ref, "data": _b64(b"mine")})
        await other.call("checkpoints", "create", {**ref, "data": _b64(b"theirs")})
        await other.call(
            "checkpoints", "create", {"agentId": "agent-2", "blobId": "blob-2", "data": ""}
        )
        assert await client.call("checkpoints", "get", ref) == {
            "found": True,
            "data": _b64(b"mine"),
        }
        await other.call("checkpoints", "update", {**ref, "data": _b64(b"theirs 2")})
        assert await client.call("checkpoints", "get", ref) == {
            "found": True,
            "data": _b64(b"mine"),
        }
        missing = {"agentId": "agent-2", "blobId": "blob-2"}
        assert await client.call("checkpoints", "get", missing) == {"found": False}
        await client.expect(Code.NOT_FOUND, "checkpoints", "update", {**missing, "data": ""})
        assert await _blob_ids(client, {}) == ["blob-1"]
        assert await _blob_ids(client, {"agentIds": ["agent-2"]}) == []
        assert await _blob_ids(client, {"blobIds": ["blob-2"]}) == []
        await other.call("checkpoints", "delete", {"filter": {"blobIds": ["blob-1"]}})
        await other.call("checkpoints", "delete", {"filter": {}})
        assert await _blob_ids(other, {}) == []
        assert await client.call("checkpoints", "get", ref) == {
            "found": True,
            "data": _b64(b"mine"),
        }
        await client.call("checkpoints", "delete", {"filter": {"agentIds": ["agent-1"]}})
        assert await _blob_ids(client, {}) == []

    async def test_checkpoint_tenants_lists_those_holding_blobs(self, client: StoreClient) -> None:
        await client.as_tenant(THIRD).call(
            "checkpoints", "create", {"agentId": "a", "blobId": "b", "data": ""}
        )
        assert THIRD in await client.stores.checkpoints.tenants()
        assert OTHER not in await client.stores.checkpoints.tenants()
