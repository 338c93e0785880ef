"""The conformance tests. See the package docstring for how a backend opts in."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bridge_store.errors import Code
from bridge_store.plugins import get_plugin_manager
from bridge_store.stores import Routes, open_stores

from .harness import StoreClient, agent, list_all, run

UNICODE_TEXT = 'héllo wörld ✓ 日本語 🚀 \u0000 \\ " \n'
BIG_INT = 2**53


class StoreConformance:
    """Mix into a test class that defines a ``store_url`` fixture."""

    @pytest.fixture
    async def client(self, store_url: str) -> AsyncIterator[StoreClient]:
        manager = get_plugin_manager()
        opened = await open_stores(manager, Routes.single(store_url), migrate=True)
        try:
            yield StoreClient(stores=opened.stores, manager=manager)
        finally:
            await opened.close()

    # -- dispatch ----------------------------------------------------------------------

    async def test_unknown_substore_and_method_are_unimplemented(self, client: StoreClient) -> None:
        await client.expect(Code.UNIMPLEMENTED, "widgets", "get", {})
        await client.expect(Code.UNIMPLEMENTED, "agents", "append", {})
        await client.expect(Code.UNIMPLEMENTED, "runEvents", "get", {})

    # -- agents ------------------------------------------------------------------------

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

    async def test_agent_invalid_input_names_the_field(self, client: StoreClient) -> None:
        cases = [
            ("get", {}, "input.agentId"),
            ("get", {"agentId": ""}, "input.agentId"),
            ("get", {"agentId": 7}, "input.agentId"),
            ("create", {}, "input.agent"),
            ("create", {"agent": agent("")}, "input.agent.agentId"),
            ("create", {"agent": {**agent("a"), "updatedAt": "soon"}}, "input.agent.updatedAt"),
            ("create", {"agent": {**agent("a"), "updatedAt": 1.5}}, "input.agent.updatedAt"),
            ("create", {"agent": {**agent("a"), "cwd": None}}, "input.agent.cwd"),
            ("create", {"agent": {**agent("a"), "sdkMetadata": "x"}}, "input.agent.sdkMetadata"),
            ("update", {"agent": []}, "input.agent"),
            ("delete", {}, "input.filter"),
            ("delete", {"filter": {"agentIds": "a"}}, "input.filter.agentIds"),
            ("delete", {"filter": {"agentIds": ["a", 3]}}, "input.filter.agentIds[1]"),
            ("list", {"filter": {"limit": 0}}, "input.filter.limit"),
            ("list", {"filter": {"limit": -3}}, "input.filter.limit"),
            ("list", {"filter": {"limit": "10"}}, "input.filter.limit"),
            ("list", {"filter": {"cursor": "not-a-cursor"}}, "input.filter.cursor"),
            ("list", {"filter": {"cwd": 5}}, "input.filter.cwd"),
            ("list", {"filter": []}, "input.filter"),
        ]
        for method, data, field in cases:
            message = await client.expect(Code.INVALID_ARGUMENT, "agents", method, data)
            assert field in message, (method, data, message)
        assert await client.call("agents", "list", {}) == {"items": []}

    async def test_keys_no_backend_can_index_are_invalid(self, client: StoreClient) -> None:
        for bad in ("nul\x00inside", "half \ud83d"):
            cases = [
                ("agents", "create", {"agent": agent(bad)}, "input.agent.agentId"),
                ("agents", "create", {"agent": agent("a", cwd=bad)}, "input.agent.cwd"),
                ("agents", "list", {"filter": {"cwd": bad}}, "input.filter.cwd"),
                ("agents", "delete", {"filter": {"agentIds": [bad]}}, "input.filter.agentIds[0]"),
                ("runs", "create", {"run": run(bad)}, "input.run.runId"),
                ("runs", "get", {"agentId": bad, "runId": "r"}, "input.agentId"),
                ("runEvents", "append", {"runId": bad, "eventType": "t"}, "input.runId"),
                (
                    "runEvents",
                    "append",
                    {"runId": "r", "eventType": "t", "idempotencyKey": bad},
                    "input.idempotencyKey",
                ),
                ("checkpoints", "get", {"agentId": "a", "blobId": bad}, "input.blobId"),
            ]
            for substore, method, data, field in cases:
                message = await client.expect(Code.INVALID_ARGUMENT, substore, method, data)
                assert field in message, (substore, method, message)
        # Document bodies are not keys: they keep both.
        doc = agent("a", name="nul\x00 and half \ud83d")
        assert await client.call("agents", "create", {"agent": doc}) == doc
        assert await client.call("agents", "get", {"agentId": "a"}) == doc
        event = {"runId": "r", "eventType": "t", "payload": {"text": "\x00\ud83d"}}
        stored = await client.call("runEvents", "append", event)
        assert stored["payload"] == event["payload"]
        listed = await client.call("runEvents", "list", {"runId": "r"})
        assert listed["items"] == [stored]

    async def test_cursor_of_one_substore_is_rejected_by_another(self, client: StoreClient) -> None:
        for index in range(3):
            await client.call("agents", "create", {"agent": agent(f"a{index}")})
        cursor = (await client.call("agents", "list", {"filter": {"limit": 1}}))["nextCursor"]
        await client.expect(Code.INVALID_ARGUMENT, "runs", "list", {"filter": {"cursor": cursor}})

    # -- runs --------------------------------------------------------------------------

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

    async def test_run_invalid_input_names_the_field(self, client: StoreClient) -> None:
        cases = [
            ("get", {"agentId": "a"}, "input.runId"),
            ("get", {"runId": "r"}, "input.agentId"),
            ("create", {"run": run("r", "")}, "input.run.agentId"),
            ("create", {"run": {**run("r"), "turnNumber": None}}, "input.run.turnNumber"),
            ("create", {"run": {**run("r"), "turnNumber": True}}, "input.run.turnNumber"),
            ("create", {"run": {**run("r"), "model": "composer"}}, "input.run.model"),
            ("update", {"run": "r"}, "input.run"),
            ("delete", {"filter": None}, "input.filter"),
            ("delete", {"filter": {"runIds": [""]}}, "input.filter.runIds[0]"),
            ("list", {"filter": {"agentIds": {}}}, "input.filter.agentIds"),
            ("list", {"filter": {"limit": 2.5}}, "input.filter.limit"),
        ]
        for method, data, field in cases:
            message = await client.expect(Code.INVALID_ARGUMENT, "runs", method, data)
            assert field in message, (method, data, message)
        assert await client.call("runs", "list", {}) == {"items": []}

    # -- runEvents ---------------------------------------------------------------------

    async def test_event_append_assigns_seq_and_offset(self, client: StoreClient) -> None:
        first = await client.call(
            "runEvents",
            "append",
            {"runId": "run-1", "eventType": "run_stream_event", "payload": {"text": UNICODE_TEXT}},
        )
        assert first["runId"] == "run-1"
        assert (first["seq"], first["offset"]) == (1, "1")
        assert first["eventType"] == "run_stream_event"
        assert first["payload"] == {"text": UNICODE_TEXT}
        assert first["payloadRef"] is None
        assert first["idempotencyKey"] is None
        assert isinstance(first["createdAt"], int)
        second = await client.call(
            "runEvents", "append", {"runId": "run-1", "eventType": "done", "payloadRef": "ref-1"}
        )
        assert (second["seq"], second["offset"], second["payload"]) == (2, "2", None)
        assert second["payloadRef"] == "ref-1"
        other_run = await client.call("runEvents", "append", {"runId": "run-2", "eventType": "x"})
        assert other_run["seq"] == 1
        listed = await client.call("runEvents", "list", {"runId": "run-1"})
        assert listed == {"items": [first, second]}

    async def test_event_payload_of_any_json_shape(self, client: StoreClient) -> None:
        payloads = [
            None,
            0,
            BIG_INT,
            -1.25,
            "text",
            [1, [2, {"a": None}]],
            {"deep": {"er": [True]}},
        ]
        for payload in payloads:
            await client.call(
                "runEvents", "append", {"runId": "r", "eventType": "t", "payload": payload}
            )
        listed = await client.call("runEvents", "list", {"runId": "r"})
        assert [item["payload"] for item in listed["items"]] == payloads
        assert isinstance(listed["items"][2]["payload"], int)

    async def test_event_append_is_idempotent_per_run_and_key(self, client: StoreClient) -> None:
        event = {"runId": "run-1", "eventType": "t", "payload": {"n": 1}, "idempotencyKey": "k1"}
        first = await client.call("runEvents", "append", event)
        again = await client.call("runEvents", "append", {**event, "payload": {"n": 2}})
        assert again == first
        other = await client.call("runEvents", "append", {**event, "runId": "run-2"})
        assert other["seq"] == 1
        third = await client.call("runEvents", "append", {**event, "idempotencyKey": "k2"})
        assert third["seq"] == 2
        listed = await client.call("runEvents", "list", {"runId": "run-1"})
        assert [item["seq"] for item in listed["items"]] == [1, 2]
        assert listed["items"][0]["payload"] == {"n": 1}

    async def test_event_list_after_offset_limit_and_next_offset(self, client: StoreClient) -> None:
        for index in range(7):
            await client.call("runEvents", "append", {"runId": "r", "eventType": f"e{index}"})
        page = await client.call(
            "runEvents", "list", {"runId": "r", "afterOffset": "2", "limit": 3}
        )
        assert [item["seq"] for item in page["items"]] == [3, 4, 5]
        assert page["nextOffset"] == "5"
        page = await client.call(
            "runEvents", "list", {"runId": "r", "afterOffset": "5", "limit": 3}
        )
        assert [item["seq"] for item in page["items"]] == [6, 7]
        assert "nextOffset" not in page
        assert await client.call("runEvents", "list", {"runId": "r", "afterOffset": "7"}) == {
            "items": []
        }
        assert await client.call("runEvents", "list", {"runId": "unknown"}) == {"items": []}

    async def test_event_list_default_limit_is_100(self, client: StoreClient) -> None:
        await asyncio.gather(
            *(
                client.call("runEvents", "append", {"runId": "r", "eventType": "t"})
                for _ in range(101)
            )
        )
        page = await client.call("runEvents", "list", {"runId": "r"})
        assert len(page["items"]) == 100
        assert page["nextOffset"] == "100"

    async def test_200_concurrent_appends_give_gapless_seq(self, client: StoreClient) -> None:
        results = await asyncio.gather(
            *(
                client.call(
                    "runEvents", "append", {"runId": "hot", "eventType": "t", "payload": index}
                )
                for index in range(200)
            )
        )
        assert sorted(event["seq"] for event in results) == list(range(1, 201))
        listed = await list_events(client, "hot")
        assert [event["seq"] for event in listed] == list(range(1, 201))
        assert sorted(event["payload"] for event in listed) == list(range(200))
        by_payload = {event["payload"]: event["seq"] for event in listed}
        assert all(by_payload[event["payload"]] == event["seq"] for event in results)

    async def test_racing_appends_with_one_key_store_one_event(self, client: StoreClient) -> None:
        event = {"runId": "r", "eventType": "t", "idempotencyKey": "same"}
        results = await asyncio.gather(
            *(client.call("runEvents", "append", {**event, "payload": n}) for n in range(20))
        )
        assert all(result == results[0] for result in results)
        listed = await client.call("runEvents", "list", {"runId": "r"})
        assert listed["items"] == [results[0]]

    async def test_event_delete_filters(self, client: StoreClient) -> None:
        for run_id in ("r1", "r2", "r3"):
            await client.call(
                "runEvents", "append", {"runId": run_id, "eventType": "t", "idempotencyKey": "k"}
            )
        await client.call("runEvents", "delete", {"filter": {"runIds": ["r1", "r2"]}})
        assert await client.call("runEvents", "list", {"runId": "r1"}) == {"items": []}
        assert len((await client.call("runEvents", "list", {"runId": "r3"}))["items"]) == 1
        # A deleted run's log starts again at seq 1 and its keys are free again.
        again = await client.call(
            "runEvents", "append", {"runId": "r1", "eventType": "t", "idempotencyKey": "k"}
        )
        assert again["seq"] == 1
        await client.call("runEvents", "delete", {"filter": {}})
        for run_id in ("r1", "r2", "r3"):
            assert await client.call("runEvents", "list", {"runId": run_id}) == {"items": []}

    async def test_event_invalid_input_names_the_field(self, client: StoreClient) -> None:
        cases = [
            ("append", {"eventType": "t"}, "input.runId"),
            ("append", {"runId": "r"}, "input.eventType"),
            (
                "append",
                {"runId": "r", "eventType": "t", "idempotencyKey": 5},
                "input.idempotencyKey",
            ),
            ("append", {"runId": "r", "eventType": "t", "payloadRef": []}, "input.payloadRef"),
            ("list", {}, "input.runId"),
            ("list", {"runId": "r", "afterOffset": "abc"}, "input.afterOffset"),
            ("list", {"runId": "r", "afterOffset": "-1"}, "input.afterOffset"),
            ("list", {"runId": "r", "limit": 0}, "input.limit"),
            ("delete", {"filter": {"runIds": "r"}}, "input.filter.runIds"),
        ]
        for method, data, field in cases:
            message = await client.expect(Code.INVALID_ARGUMENT, "runEvents", method, data)
            assert field in message, (method, data, message)
        assert await client.call("runEvents", "list", {"runId": "r"}) == {"items": []}

    # -- checkpoints -------------------------------------------------------------------

    async def test_checkpoint_get_create_update(self, client: StoreClient) -> None:
        key = {"agentId": "a", "blobId": "b"}
        assert await client.call("checkpoints", "get", key) == {"found": False}
        data = base64.b64encode(b"\x00\x01binary\xff").decode()
        assert await client.call("checkpoints", "create", {**key, "data": data}) is None
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": data}
        await client.expect(Code.ALREADY_EXISTS, "checkpoints", "create", {**key, "data": ""})
        newer = base64.b64encode(b"newer").decode()
        assert await client.call("checkpoints", "update", {**key, "data": newer}) is None
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": newer}
        await client.expect(
            Code.NOT_FOUND, "checkpoints", "update", {"agentId": "a", "blobId": "c", "data": ""}
        )
        assert await client.call("checkpoints", "get", {"agentId": "a", "blobId": "c"}) == {
            "found": False
        }
        # Blobs belong to an agent: the same blob id of another agent is another blob.
        assert await client.call("checkpoints", "get", {"agentId": "z", "blobId": "b"}) == {
            "found": False
        }

    async def test_empty_checkpoint_blob_round_trips(self, client: StoreClient) -> None:
        key = {"agentId": "a", "blobId": "empty"}
        await client.call("checkpoints", "create", {**key, "data": ""})
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": ""}

    async def test_32_mib_checkpoint_blob_round_trips(self, client: StoreClient) -> None:
        blob = os.urandom(32 * 1024 * 1024)
        data = base64.b64encode(blob).decode()
        key = {"agentId": "a", "blobId": "big"}
        await client.call("checkpoints", "create", {**key, "data": data})
        stored = await client.call("checkpoints", "get", key)
        assert stored["found"] is True
        assert base64.b64decode(stored["data"]) == blob

    async def test_checkpoint_list_order_filters_and_pages(self, client: StoreClient) -> None:
        for agent_id in ("a1", "a2"):
            for blob_id in ("b3", "b1", "b2"):
                await client.call(
                    "checkpoints", "create", {"agentId": agent_id, "blobId": blob_id, "data": ""}
                )
        everything = await list_all(client, "checkpoints", {"limit": 4})
        assert everything == ["b1", "b1", "b2", "b2", "b3", "b3"]
        assert await list_all(client, "checkpoints", {"agentIds": ["a2"], "limit": 1}) == [
            "b1",
            "b2",
            "b3",
        ]
        picked = await list_all(
            client, "checkpoints", {"agentIds": ["a1"], "blobIds": ["b3", "b9"]}
        )
        assert picked == ["b3"]
        page = await client.call("checkpoints", "list", {})
        assert page == {"items": everything}

    async def test_checkpoint_delete_filters(self, client: StoreClient) -> None:
        for agent_id in ("a1", "a2"):
            for blob_id in ("b1", "b2"):
                await client.call(
                    "checkpoints",
                    "create",
                    {"agentId": agent_id, "blobId": blob_id, "data": "AA=="},
                )
        await client.call(
            "checkpoints", "delete", {"filter": {"agentIds": ["a1"], "blobIds": ["b1"]}}
        )
        assert await list_all(client, "checkpoints", {"agentIds": ["a1"]}) == ["b2"]
        await client.call("checkpoints", "delete", {"filter": {"blobIds": ["b2"]}})
        assert await list_all(client, "checkpoints", {}) == ["b1"]
        await client.call("checkpoints", "delete", {"filter": {}})
        assert await list_all(client, "checkpoints", {}) == []

    async def test_checkpoint_invalid_input_names_the_field(self, client: StoreClient) -> None:
        cases = [
            ("get", {"blobId": "b"}, "input.agentId"),
            ("get", {"agentId": "a"}, "input.blobId"),
            ("create", {"agentId": "a", "blobId": "b"}, "input.data"),
            ("create", {"agentId": "a", "blobId": "b", "data": "not base64!"}, "input.data"),
            ("create", {"agentId": "a", "blobId": "b", "data": 12}, "input.data"),
            ("update", {"agentId": "a", "blobId": "", "data": ""}, "input.blobId"),
            ("delete", {}, "input.filter"),
            ("list", {"filter": {"blobIds": [None]}}, "input.filter.blobIds[0]"),
            ("list", {"filter": {"cursor": 42}}, "input.filter.cursor"),
        ]
        for method, data, field in cases:
            message = await client.expect(Code.INVALID_ARGUMENT, "checkpoints", method, data)
            assert field in message, (method, data, message)
        assert await client.call("checkpoints", "list", {}) == {"items": []}


async def list_events(client: StoreClient, run_id: str) -> list[Any]:
    """Every event of a run, following nextOffset."""
    events: list[Any] = []
    offset = "0"
    while True:
        page = await client.call("runEvents", "list", {"runId": run_id, "afterOffset": offset})
        events.extend(page["items"])
        if "nextOffset" not in page:
            return events
        offset = page["nextOffset"]
