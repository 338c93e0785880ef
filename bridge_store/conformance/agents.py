"""Conformance of the agents substore. See the package docstring for how to opt in."""

from __future__ import annotations

import math
from typing import ClassVar

from bridge_store.backend.substores import SubstoreName
from bridge_store.errors import Code
from bridge_store.wire.fields import MAX_CURSOR_LENGTH, MAX_CWD_BYTES

from .creators import AgentCreatorConformance
from .harness import BIG_INT, UNICODE_TEXT, StoreClient, agent, list_all, longest_key
from .tenants import AgentTenantConformance
from .workspaces import AgentWorkspaceConformance


class AgentConformance(AgentTenantConformance, AgentCreatorConformance, AgentWorkspaceConformance):
    """The agents substore's contract; mix into a class that defines ``store_url``."""

    substore: ClassVar[SubstoreName | None] = "agents"

    async def test_agent_get_missing_is_null(self, client: StoreClient) -> None:
        assert await client.call("agents", "get", {"agentId": "nobody"}) is None

    async def test_agent_create_then_get_returns_document_unchanged(
        self, client: StoreClient
    ) -> None:
        doc = agent(
            "agent-1",
            name=UNICODE_TEXT,
            latestCheckpoint={"schemaVersion": 1, "rootBlobId": "blob-9"},
            futureField={"nested": [1, 2.5, None, True, "x"], "big": BIG_INT},
            activeRunId=None,
        )
        assert await client.call("agents", "create", {"agent": doc}) == doc
        stored = await client.call("agents", "get", {"agentId": "agent-1"})
        assert stored == doc
        assert isinstance(stored["updatedAt"], int)
        assert isinstance(stored["futureField"]["big"], int)
        assert stored["activeRunId"] is None

    async def test_agent_create_existing_is_already_exists_and_keeps_original(
        self, client: StoreClient
    ) -> None:
        original = agent("agent-1", name="original")
        await client.call("agents", "create", {"agent": original})
        await client.expect(
            Code.ALREADY_EXISTS, "agents", "create", {"agent": agent("agent-1", name="imposter")}
        )
        assert await client.call("agents", "get", {"agentId": "agent-1"}) == original

    async def test_agent_update_replaces_whole_document(self, client: StoreClient) -> None:
        await client.call("agents", "create", {"agent": agent("agent-1", extra="gone soon")})
        replacement = agent("agent-1", updated_at=2000, status="running", activeRunId="run-1")
        assert await client.call("agents", "update", {"agent": replacement}) == replacement
        stored = await client.call("agents", "get", {"agentId": "agent-1"})
        assert stored == replacement
        assert "extra" not in stored

    async def test_agent_update_missing_is_not_found_and_creates_nothing(
        self, client: StoreClient
    ) -> None:
        await client.expect(Code.NOT_FOUND, "agents", "update", {"agent": agent("ghost")})
        assert await client.call("agents", "get", {"agentId": "ghost"}) is None

    async def test_agent_list_order_and_default_limit(self, client: StoreClient) -> None:
        # 55 agents; updatedAt repeats so the agentId tie-break is exercised.
        for index in range(55):
            doc = agent(f"agent-{index:02d}", updated_at=1000 + index // 5)
            await client.call("agents", "create", {"agent": doc})
        first = await client.call("agents", "list", {})
        assert len(first["items"]) == 50
        assert isinstance(first["nextCursor"], str)
        everything = await list_all(client, "agents", {})
        keys = [(item["updatedAt"], item["agentId"]) for item in everything]
        assert keys == sorted(keys, reverse=True)
        assert len(everything) == 55
        assert [item["agentId"] for item in first["items"]] == [
            item["agentId"] for item in everything[:50]
        ]

    async def test_agent_list_last_page_has_no_cursor(self, client: StoreClient) -> None:
        for index in range(4):
            await client.call("agents", "create", {"agent": agent(f"a{index}", updated_at=index)})
        page = await client.call("agents", "list", {"filter": {"limit": 2}})
        assert [item["agentId"] for item in page["items"]] == ["a3", "a2"]
        page = await client.call(
            "agents", "list", {"filter": {"limit": 2, "cursor": page["nextCursor"]}}
        )
        assert [item["agentId"] for item in page["items"]] == ["a1", "a0"]
        assert "nextCursor" not in page
        empty = await client.call("agents", "list", {"filter": {"cwd": "/nowhere"}})
        assert empty == {"items": []}

    async def test_agent_list_filters_by_cwd(self, client: StoreClient) -> None:
        for index in range(6):
            cwd = "/work/even" if index % 2 == 0 else "/work/odd"
            await client.call("agents", "create", {"agent": agent(f"a{index}", cwd=cwd)})
        even = await list_all(client, "agents", {"cwd": "/work/even", "limit": 1})
        assert sorted(item["agentId"] for item in even) == ["a0", "a2", "a4"]

    async def test_agent_cursor_stays_correct_while_rows_are_updated(
        self, client: StoreClient
    ) -> None:
        for index in range(10):
            await client.call("agents", "create", {"agent": agent(f"a{index}", updated_at=index)})
        first = await client.call("agents", "list", {"filter": {"limit": 4}})
        seen = [item["agentId"] for item in first["items"]]
        assert seen == ["a9", "a8", "a7", "a6"]
        # Between pages: a seen agent and an unseen one move to the top, one unseen is
        # deleted, one new agent appears at the top (already passed).
        await client.call("agents", "update", {"agent": agent("a8", updated_at=100)})
        await client.call("agents", "update", {"agent": agent("a2", updated_at=101)})
        await client.call("agents", "delete", {"filter": {"agentIds": ["a4"]}})
        await client.call("agents", "create", {"agent": agent("new", updated_at=102)})
        rest = await list_all(client, "agents", {"limit": 4, "cursor": first["nextCursor"]})
        rest_ids = [item["agentId"] for item in rest]
        # Every agent not touched between pages comes exactly once, in order.
        assert rest_ids == ["a5", "a3", "a1", "a0"]
        assert not set(rest_ids) & set(seen)

    async def test_agent_delete_filters(self, client: StoreClient) -> None:
        for index in range(6):
            cwd = "/work/x" if index < 3 else "/work/y"
            await client.call("agents", "create", {"agent": agent(f"a{index}", cwd=cwd)})
        await client.call("agents", "delete", {"filter": {"agentIds": ["a0", "missing"]}})
        await client.call(
            "agents", "delete", {"filter": {"agentIds": ["a1", "a4"], "cwd": "/work/x"}}
        )
        remaining = sorted(item["agentId"] for item in await list_all(client, "agents", {}))
        assert remaining == ["a2", "a3", "a4", "a5"]
        await client.call("agents", "delete", {"filter": {"cwd": "/work/y"}})
        remaining = sorted(item["agentId"] for item in await list_all(client, "agents", {}))
        assert remaining == ["a2"]

    async def test_agent_delete_with_empty_filter_deletes_all(self, client: StoreClient) -> None:
        for index in range(3):
            await client.call("agents", "create", {"agent": agent(f"a{index}")})
        assert await client.call("agents", "delete", {"filter": {"agentIds": []}}) is None
        assert await client.call("agents", "list", {}) == {"items": []}
        await client.call("agents", "create", {"agent": agent("again")})
        await client.call("agents", "delete", {"filter": {}})
        assert await client.call("agents", "list", {}) == {"items": []}

    async def test_agent_document_keeps_nul_and_lone_surrogates(self, client: StoreClient) -> None:
        # Keys cannot hold them (the contract refuses such ids), document bodies can.
        doc = agent("a", name="nul\x00 and half \ud83d")
        assert await client.call("agents", "create", {"agent": doc}) == doc
        assert await client.call("agents", "get", {"agentId": "a"}) == doc

    async def test_agent_longest_ids_and_cwd_are_stored_and_paged(
        self, client: StoreClient
    ) -> None:
        # The contract's limits (contract.MAX_KEY_BYTES, MAX_CWD_BYTES) must fit every
        # backend's indexes, in text no database compresses.
        cwd = longest_key(0, MAX_CWD_BYTES)
        ids = [longest_key(1), longest_key(2)]
        for agent_id in ids:
            doc = agent(agent_id, cwd=cwd)
            assert await client.call("agents", "create", {"agent": doc}) == doc
            assert await client.call("agents", "get", {"agentId": agent_id}) == doc
        page = await client.call("agents", "list", {"filter": {"cwd": cwd, "limit": 1}})
        assert len(page["nextCursor"]) <= MAX_CURSOR_LENGTH
        listed = await list_all(client, "agents", {"cwd": cwd, "limit": 1})
        assert sorted(item["agentId"] for item in listed) == sorted(ids)

    async def test_agent_negative_zero_keeps_its_sign(self, client: StoreClient) -> None:
        doc = agent("a", futureField={"negativeZero": -0.0})
        await client.call("agents", "create", {"agent": doc})
        stored = await client.call("agents", "get", {"agentId": "a"})
        assert math.copysign(1.0, stored["futureField"]["negativeZero"]) == -1.0
