"""Conformance of the runs substore. See the package docstring for how to opt in."""

from __future__ import annotations

from typing import ClassVar

from bridge_store.backend.substores import SubstoreName
from bridge_store.errors import Code
from bridge_store.wire.fields import MAX_CURSOR_LENGTH

from .creators import RunCreatorConformance
from .harness import BIG_INT, UNICODE_TEXT, StoreClient, list_all, longest_key, run
from .inventory import RunInventoryConformance
from .tenants import RunTenantConformance


class RunConformance(RunTenantConformance, RunInventoryConformance, RunCreatorConformance):
    """The runs substore's contract; mix into a class that defines ``store_url``."""

    substore: ClassVar[SubstoreName | None] = "runs"

    async def test_run_create_get_update(self, client: StoreClient) -> None:
        doc = run("run-1", usage={"inputTokens": 12, "cost": 0.25}, note=UNICODE_TEXT)
        assert await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-1"}) is None
        assert await client.call("runs", "create", {"run": doc}) == doc
        assert await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-1"}) == doc
        finished = run("run-1", status="finished", result={"text": "done"}, endedAt=BIG_INT)
        assert await client.call("runs", "update", {"run": finished}) == finished
        stored = await client.call("runs", "get", {"agentId": "agent-1", "runId": "run-1"})
        assert stored == finished
        assert isinstance(stored["endedAt"], int)

    async def test_run_identity_is_agent_and_run_id(self, client: StoreClient) -> None:
        await client.call("runs", "create", {"run": run("run-1", "agent-1")})
        await client.call("runs", "create", {"run": run("run-1", "agent-2", status="running")})
        await client.expect(Code.ALREADY_EXISTS, "runs", "create", {"run": run("run-1", "agent-1")})
        await client.expect(Code.NOT_FOUND, "runs", "update", {"run": run("run-1", "agent-3")})
        assert await client.call("runs", "get", {"agentId": "agent-3", "runId": "run-1"}) is None
        other = await client.call("runs", "get", {"agentId": "agent-2", "runId": "run-1"})
        assert other["status"] == "running"

    async def test_run_list_order_filters_and_pages(self, client: StoreClient) -> None:
        for index in range(12):
            agent_id = f"agent-{index % 3}"
            doc = run(f"run-{index:02d}", agent_id, turn_number=(11 - index) // 2)
            await client.call("runs", "create", {"run": doc})
        everything = await list_all(client, "runs", {"limit": 5})
        keys = [(item["turnNumber"], item["runId"]) for item in everything]
        assert keys == sorted(keys)
        assert len(everything) == 12
        of_agent = await list_all(client, "runs", {"agentIds": ["agent-1"], "limit": 2})
        assert [item["runId"] for item in of_agent] == ["run-10", "run-07", "run-04", "run-01"]
        picked = await list_all(client, "runs", {"runIds": ["run-03", "run-04", "nope"]})
        assert [item["runId"] for item in picked] == ["run-04", "run-03"]
        both = await list_all(
            client, "runs", {"agentIds": ["agent-0"], "runIds": ["run-03", "run-04"]}
        )
        assert [item["runId"] for item in both] == ["run-03"]

    async def test_run_list_default_limit_is_50(self, client: StoreClient) -> None:
        for index in range(51):
            await client.call("runs", "create", {"run": run(f"run-{index:03d}", turn_number=index)})
        page = await client.call("runs", "list", {"filter": {}})
        assert len(page["items"]) == 50
        rest = await client.call("runs", "list", {"filter": {"cursor": page["nextCursor"]}})
        assert [item["runId"] for item in rest["items"]] == ["run-050"]
        assert "nextCursor" not in rest

    async def test_run_cursor_stays_correct_while_rows_are_updated(
        self, client: StoreClient
    ) -> None:
        for index in range(8):
            await client.call("runs", "create", {"run": run(f"run-{index}", turn_number=index)})
        first = await client.call("runs", "list", {"filter": {"limit": 3}})
        assert [item["runId"] for item in first["items"]] == ["run-0", "run-1", "run-2"]
        await client.call("runs", "update", {"run": run("run-1", turn_number=1, status="error")})
        await client.call("runs", "update", {"run": run("run-5", turn_number=5, status="running")})
        await client.call("runs", "delete", {"filter": {"runIds": ["run-6"]}})
        rest = await list_all(client, "runs", {"limit": 3, "cursor": first["nextCursor"]})
        assert [item["runId"] for item in rest] == ["run-3", "run-4", "run-5", "run-7"]
        assert rest[2]["status"] == "running"

    async def test_run_delete_filters(self, client: StoreClient) -> None:
        for index in range(6):
            await client.call("runs", "create", {"run": run(f"run-{index}", f"agent-{index % 2}")})
        await client.call(
            "runs", "delete", {"filter": {"agentIds": ["agent-0"], "runIds": ["run-0", "run-1"]}}
        )
        remaining = {item["runId"] for item in await list_all(client, "runs", {})}
        assert remaining == {"run-1", "run-2", "run-3", "run-4", "run-5"}
        await client.call("runs", "delete", {"filter": {"agentIds": ["agent-1"]}})
        remaining = {item["runId"] for item in await list_all(client, "runs", {})}
        assert remaining == {"run-2", "run-4"}
        await client.call("runs", "delete", {"filter": {"runIds": ["run-2"]}})
        assert {item["runId"] for item in await list_all(client, "runs", {})} == {"run-4"}
        await client.call("runs", "delete", {"filter": {"agentIds": [], "runIds": []}})
        assert await client.call("runs", "list", {}) == {"items": []}

    async def test_run_longest_ids_are_stored_and_paged(self, client: StoreClient) -> None:
        # A run is keyed by two ids; both at contract.MAX_KEY_BYTES must fit together.
        run_id, agents = longest_key(0), [longest_key(1), longest_key(2)]
        for agent_id in agents:
            doc = run(run_id, agent_id)
            assert await client.call("runs", "create", {"run": doc}) == doc
            assert await client.call("runs", "get", {"agentId": agent_id, "runId": run_id}) == doc
        page = await client.call("runs", "list", {"filter": {"runIds": [run_id], "limit": 1}})
        assert len(page["nextCursor"]) <= MAX_CURSOR_LENGTH
        listed = await list_all(client, "runs", {"runIds": [run_id], "limit": 1})
        assert sorted(item["agentId"] for item in listed) == sorted(agents)
