"""Who started it: each create records the caller's token name beside the document.

The record is the backend's, never part of the document: what ``get`` and ``list``
return is exactly what the client stored, field for field and in its order. One mixin
per substore; the agents and runs mixins include their own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bridge_store.security.auth import Principal, Scope

from .base import ConformanceBase
from .harness import StoreClient, agent, list_all, run
from .tenants import OTHER


def as_token(client: StoreClient, name: str, tenant: str | None = None) -> StoreClient:
    """The same store, called with the write token ``name`` (of ``tenant``)."""
    principal = Principal(name=name, tenant=tenant or client.principal.tenant, scope=Scope.WRITE)
    return dataclasses.replace(client, principal=principal)


def same_fields(stored: Any, sent: dict[str, Any]) -> bool:
    """Equal, and with the fields in the order they were sent (nothing added)."""
    return isinstance(stored, dict) and list(stored.items()) == list(sent.items())


class AgentCreatorConformance(ConformanceBase):
    """Agents remember the token that created them, outside their documents."""

    async def test_agent_creator_is_recorded_beside_an_unchanged_document(
        self, client: StoreClient
    ) -> None:
        doc = agent("agent-1", futureField={"kept": [1, None]})
        assert same_fields(
            await as_token(client, "alice").call("agents", "create", {"agent": doc}), doc
        )
        assert same_fields(await client.call("agents", "get", {"agentId": "agent-1"}), doc)
        [listed] = await list_all(client, "agents", {})
        assert same_fields(listed, doc)
        tenant = client.principal.tenant
        assert await client.stores.agents.creators(tenant, ["agent-1"]) == {"agent-1": "alice"}

    async def test_agent_update_keeps_its_creator(self, client: StoreClient) -> None:
        await as_token(client, "alice").call("agents", "create", {"agent": agent("agent-1")})
        changed = agent("agent-1", updated_at=2000, status="running")
        await as_token(client, "bob").call("agents", "update", {"agent": changed})
        assert same_fields(await client.call("agents", "get", {"agentId": "agent-1"}), changed)
        tenant = client.principal.tenant
        assert await client.stores.agents.creators(tenant, ["agent-1"]) == {"agent-1": "alice"}

    async def test_agent_delete_forgets_its_creator(self, client: StoreClient) -> None:
        alice = as_token(client, "alice")
        await alice.call("agents", "create", {"agent": agent("agent-1")})
        await alice.call("agents", "create", {"agent": agent("agent-2", cwd="/work/b")})
        await client.call("agents", "delete", {"filter": {"agentIds": ["agent-1"]}})
        await client.call("agents", "delete", {"filter": {"cwd": "/work/b"}})
        tenant = client.principal.tenant
        assert await client.stores.agents.creators(tenant, ["agent-1", "agent-2"]) == {}
        await as_token(client, "bob").call("agents", "create", {"agent": agent("agent-1")})
        assert await client.stores.agents.creators(tenant, ["agent-1"]) == {"agent-1": "bob"}

    async def test_agents_without_a_creator_are_absent(self, client: StoreClient) -> None:
        tenant = client.principal.tenant
        # A copy or an import stores items without a caller.
        await client.stores.agents.create(tenant, agent("copied"))
        await as_token(client, "alice").call("agents", "create", {"agent": agent("agent-1")})
        found = await client.stores.agents.creators(tenant, ["copied", "agent-1", "nobody"])
        assert found == {"agent-1": "alice"}
        assert await client.stores.agents.creators(tenant, []) == {}

    async def test_agent_creators_are_per_tenant(self, client: StoreClient) -> None:
        await as_token(client, "alice").call("agents", "create", {"agent": agent("agent-1")})
        await as_token(client, "bob", OTHER).call("agents", "create", {"agent": agent("agent-1")})
        await as_token(client, "bob", OTHER).call("agents", "create", {"agent": agent("agent-b")})
        tenant = client.principal.tenant
        assert await client.stores.agents.creators(tenant, ["agent-1", "agent-b"]) == {
            "agent-1": "alice"
        }
        assert await client.stores.agents.creators(OTHER, ["agent-1", "agent-b"]) == {
            "agent-1": "bob",
            "agent-b": "bob",
        }


class RunCreatorConformance(ConformanceBase):
    """Runs remember the token that created them, outside their documents."""

    async def test_run_creator_is_recorded_beside_an_unchanged_document(
        self, client: StoreClient
    ) -> None:
        doc = run("run-1", futureField={"kept": [1, None]})
        assert same_fields(
            await as_token(client, "alice").call("runs", "create", {"run": doc}), doc
        )
        stored = await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-1"})
        assert same_fields(stored, doc)
        [listed] = await list_all(client, "runs", {})
        assert same_fields(listed, doc)
        tenant = client.principal.tenant
        key = ("agent-1", "run-1")
        assert await client.stores.runs.creators(tenant, [key]) == {key: "alice"}

    async def test_run_update_keeps_and_delete_forgets_its_creator(
        self, client: StoreClient
    ) -> None:
        alice, bob = as_token(client, "alice"), as_token(client, "bob")
        for n in (1, 2, 3):
            await alice.call("runs", "create", {"run": run(f"run-{n}", turn_number=n)})
        await bob.call("runs", "update", {"run": run("run-1", status="finished")})
        tenant = client.principal.tenant
        keys = [("agent-1", f"run-{n}") for n in (1, 2, 3)]
        assert await client.stores.runs.creators(tenant, keys) == dict.fromkeys(keys, "alice")
        await client.call("runs", "delete", {"filter": {"runIds": ["run-1"]}})
        assert await client.stores.runs.creators(tenant, keys) == dict.fromkeys(keys[1:], "alice")
        await client.call("runs", "delete", {"filter": {"agentIds": ["agent-1"]}})
        assert await client.stores.runs.creators(tenant, keys) == {}
        await bob.call("runs", "create", {"run": run("run-1")})
        assert await client.stores.runs.creators(tenant, keys) == {keys[0]: "bob"}

    async def test_run_creators_name_exact_pairs_per_tenant(self, client: StoreClient) -> None:
        alice = as_token(client, "alice")
        await alice.call("runs", "create", {"run": run("run-1", "agent-1")})
        await alice.call("runs", "create", {"run": run("run-2", "agent-2")})
        tenant = client.principal.tenant
        await client.stores.runs.create(tenant, run("run-3", "agent-1"))
        await as_token(client, "bob", OTHER).call(
            "runs", "create", {"run": run("run-1", "agent-1")}
        )
        # (agent-1, run-2) and (agent-2, run-1) are not runs: nothing for them.
        asked = [
            ("agent-1", "run-1"),
            ("agent-1", "run-2"),
            ("agent-2", "run-1"),
            ("agent-2", "run-2"),
            ("agent-1", "run-3"),
        ]
        assert await client.stores.runs.creators(tenant, asked) == {
            ("agent-1", "run-1"): "alice",
            ("agent-2", "run-2"): "alice",
        }
        assert await client.stores.runs.creators(OTHER, asked) == {("agent-1", "run-1"): "bob"}
