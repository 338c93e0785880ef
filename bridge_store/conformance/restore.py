"""Conformance of ``runEvents.restore``: logs copied from another store, verbatim.

Not a contract method (the bridge never calls it): ``bridge-store copy`` and
``import`` call it on the backend directly, so these tests do too, then read the
result back through the contract layer as a client would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.errors import Code, ConnectError
from bridge_store.types import Document

from .base import ConformanceBase
from .harness import UNICODE_TEXT, StoreClient, list_events
from .tenants import OTHER


def stored(run_id: str, seq: int, *, key: str | None = None, payload: Any = None) -> Document:
    """An event as another store holds it: written long ago, with its own seq."""
    return {
        "runId": run_id,
        "seq": seq,
        "offset": str(seq),
        "eventType": "run_stream_event",
        "payload": payload,
        "payloadRef": None,
        "idempotencyKey": key,
        "createdAt": 1_600_000_000_000 + seq,
    }


async def restore_error(client: StoreClient, run_id: str, events: list[Document]) -> Code:
    with pytest.raises(ConnectError) as raised:
        await client.stores.run_events.restore(DEFAULT_TENANT, run_id, events)
    return raised.value.code


class RunEventRestoreConformance(ConformanceBase):
    """``restore`` stores events verbatim, idempotently, and keeps logs gapless."""

    async def test_restore_keeps_seq_offset_created_at_and_keys(self, client: StoreClient) -> None:
        events = [
            stored("r", 1, key="k1", payload={"text": UNICODE_TEXT}),
            stored("r", 2, payload=[1, None]),
            stored("r", 3, key="k3", payload=2**53),
        ]
        restored = await client.stores.run_events.restore(DEFAULT_TENANT, "r", events)
        assert restored == 3
        assert await list_events(client, "r") == events
        # Appends continue the restored log, and its keys keep deduplicating.
        appended = await client.call("runEvents", "append", {"runId": "r", "eventType": "next"})
        assert (appended["seq"], appended["offset"]) == (4, "4")
        retry = {"runId": "r", "eventType": "again", "idempotencyKey": "k3"}
        assert await client.call("runEvents", "append", retry) == events[2]

    async def test_restore_twice_or_overlapping_stores_each_event_once(
        self, client: StoreClient
    ) -> None:
        events = [stored("r", seq, key=f"k{seq}") for seq in range(1, 7)]
        run_events = client.stores.run_events
        assert await run_events.restore(DEFAULT_TENANT, "r", events[:4]) == 4
        assert await run_events.restore(DEFAULT_TENANT, "r", events[:4]) == 0
        assert await run_events.restore(DEFAULT_TENANT, "r", events[2:]) == 2
        assert await list_events(client, "r") == events

    async def test_restore_after_appends_continues_the_log(self, client: StoreClient) -> None:
        first = await client.call("runEvents", "append", {"runId": "r", "eventType": "live"})
        later = [stored("r", 2), stored("r", 3)]
        assert await client.stores.run_events.restore(DEFAULT_TENANT, "r", later) == 2
        assert await list_events(client, "r") == [first, *later]

    async def test_restore_refuses_a_gap_and_stores_nothing(self, client: StoreClient) -> None:
        await client.stores.run_events.restore(DEFAULT_TENANT, "r", [stored("r", 1)])
        gap = [stored("r", 3), stored("r", 4)]
        assert await restore_error(client, "r", gap) == Code.INVALID_ARGUMENT
        assert await restore_error(client, "new", [stored("new", 2)]) == Code.INVALID_ARGUMENT
        assert [event["seq"] for event in await list_events(client, "r")] == [1]
        assert await list_events(client, "new") == []

    async def test_restore_refuses_malformed_batches(self, client: StoreClient) -> None:
        not_consecutive = [stored("r", 1), stored("r", 3)]
        other_run = [stored("r", 1), stored("x", 2)]
        wrong_offset = [{**stored("r", 1), "offset": "7"}]
        one_key_twice = [stored("r", 1, key="k"), stored("r", 2, key="k")]
        for events in (not_consecutive, other_run, wrong_offset, one_key_twice):
            assert await restore_error(client, "r", events) == Code.INVALID_ARGUMENT
        assert await list_events(client, "r") == []

    async def test_restore_refuses_a_key_held_at_another_seq(self, client: StoreClient) -> None:
        await client.call(
            "runEvents", "append", {"runId": "r", "eventType": "live", "idempotencyKey": "k"}
        )
        clash = [stored("r", 2), stored("r", 3, key="k")]
        assert await restore_error(client, "r", clash) == Code.ALREADY_EXISTS
        assert [event["seq"] for event in await list_events(client, "r")] == [1]

    async def test_restore_is_per_tenant(self, client: StoreClient) -> None:
        events = [stored("r", 1, key="k"), stored("r", 2)]
        await client.stores.run_events.restore(OTHER, "r", events)
        assert await list_events(client, "r") == []
        assert await list_events(client.as_tenant(OTHER), "r") == events
        # The same run and key in the default tenant are a log of their own.
        assert await client.stores.run_events.restore(DEFAULT_TENANT, "r", events[:1]) == 1

    async def test_racing_restores_of_one_run_store_each_event_once(
        self, client: StoreClient
    ) -> None:
        events = [stored("r", seq, key=f"k{seq}") for seq in range(1, 6)]
        restored = await asyncio.gather(
            *(client.stores.run_events.restore(DEFAULT_TENANT, "r", events) for _ in range(5))
        )
        assert sorted(restored) == [0, 0, 0, 0, 5]
        assert await list_events(client, "r") == events
        appended = await client.call("runEvents", "append", {"runId": "r", "eventType": "next"})
        assert appended["seq"] == 6
