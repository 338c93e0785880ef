"""Conformance of the runEvents substore. See the package docstring for how to opt in."""

from __future__ import annotations

import asyncio
import math
from typing import ClassVar

from bridge_store.backend.substores import SubstoreName

from .harness import BIG_INT, UNICODE_TEXT, StoreClient, list_events, longest_key
from .inventory import RunEventInventoryConformance
from .restore import RunEventRestoreConformance
from .tenants import RunEventTenantConformance


class RunEventConformance(
    RunEventTenantConformance, RunEventRestoreConformance, RunEventInventoryConformance
):
    """The runEvents substore's contract; mix into a class that defines ``store_url``."""

    substore: ClassVar[SubstoreName | None] = "runEvents"

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

    async def test_event_payload_keeps_nul_and_lone_surrogates(self, client: StoreClient) -> None:
        # Keys cannot hold them (the contract refuses such ids), payloads can.
        event = {"runId": "r", "eventType": "t", "payload": {"text": "\x00\ud83d"}}
        stored = await client.call("runEvents", "append", event)
        assert stored["payload"] == event["payload"]
        listed = await client.call("runEvents", "list", {"runId": "r"})
        assert listed["items"] == [stored]

    async def test_event_longest_run_id_and_idempotency_key_are_stored(
        self, client: StoreClient
    ) -> None:
        event = {
            "runId": longest_key(0),
            "eventType": longest_key(1),
            "idempotencyKey": longest_key(2),
        }
        stored = await client.call("runEvents", "append", event)
        assert await client.call("runEvents", "append", event) == stored
        assert await list_events(client, event["runId"]) == [stored]

    async def test_event_negative_zero_payload_keeps_its_sign(self, client: StoreClient) -> None:
        appended = await client.call(
            "runEvents", "append", {"runId": "r", "eventType": "t", "payload": -0.0}
        )
        listed = await list_events(client, "r")
        for payload in (appended["payload"], listed[0]["payload"]):
            assert math.copysign(1.0, payload) == -1.0
