"""StoreSink: writing history into a store twice changes nothing; differences are kept
unless overwritten, and an event log is rewritten with its seqs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import agent, run
from bridge_store.conformance.restore import stored
from bridge_store.lifecycle import sink as sink_module
from bridge_store.lifecycle.items import AgentItem, BlobItem, EventsItem, Item, RunItem
from bridge_store.lifecycle.sink import StoreSink
from bridge_store.lifecycle.tally import Outcome
from bridge_store.stack.stores import Routes, Stores, open_stores

TENANT = "default"


@pytest.fixture
async def stores() -> AsyncIterator[Stores]:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        yield opened.stores
    finally:
        await opened.close()


def blob(agent_id: str, blob_id: str, data: bytes | None) -> BlobItem:
    async def read() -> bytes | None:
        return data

    return BlobItem(TENANT, agent_id, blob_id, read)


def history(events: int = 5) -> list[Item]:
    log = [stored("run-1", seq, key=f"k{seq}", payload={"n": seq}) for seq in range(1, events + 1)]
    return [
        AgentItem(TENANT, agent("agent-1")),
        RunItem(TENANT, run("run-1", "agent-1")),
        EventsItem(TENANT, "run-1", log[:3]),
        EventsItem(TENANT, "run-1", log[3:]),
        blob("agent-1", "b1", b"\x00blob bytes"),
    ]


async def write_all(sink: StoreSink, items: list[Item]) -> None:
    for item in items:
        await sink.write(item)


async def test_written_twice_the_second_time_skips_everything(stores: Stores) -> None:
    first = StoreSink(stores, overwrite=False)
    await write_all(first, history())
    assert first.tally.total(Outcome.CREATED) == 1 + 1 + 5 + 1
    assert first.tally.sizes["checkpoints"] == len(b"\x00blob bytes")
    events = await stores.run_events.list(TENANT, "run-1", after_seq=0, limit=100)
    assert events == [stored("run-1", s, key=f"k{s}", payload={"n": s}) for s in range(1, 6)]
    again = StoreSink(stores, overwrite=False)
    await write_all(again, history())
    assert again.tally.total(Outcome.SAME) == 8
    assert again.tally.total(Outcome.CREATED) == 0
    assert "runEvents 5 (5 same)" in again.tally.summary()


async def test_a_longer_source_log_is_continued(stores: Stores) -> None:
    await write_all(StoreSink(stores, overwrite=False), history(events=4))
    sink = StoreSink(stores, overwrite=False)
    await write_all(sink, history(events=7))
    assert sink.tally.counts["runEvents"] == {Outcome.SAME: 4, Outcome.CREATED: 3}
    events = await stores.run_events.list(TENANT, "run-1", after_seq=0, limit=100)
    assert [event["seq"] for event in events] == list(range(1, 8))


async def test_differences_are_reported_and_left_alone(stores: Stores) -> None:
    await write_all(StoreSink(stores, overwrite=False), history())
    changed: list[Item] = [
        AgentItem(TENANT, agent("agent-1", name="renamed")),
        RunItem(TENANT, run("run-1", "agent-1", status="finished")),
        EventsItem(TENANT, "run-1", [stored("run-1", 1, key="k1", payload={"n": 1.0})]),
        EventsItem(TENANT, "run-1", [stored("run-1", 2, key="k2", payload={"n": 2})]),
        blob("agent-1", "b1", b"other bytes"),
    ]
    sink = StoreSink(stores, overwrite=False)
    await write_all(sink, changed)
    # 1.0 is not 1: documents are compared as JSON text, not as Python values.
    assert sink.tally.total(Outcome.DIFFERENT) == 1 + 1 + 2 + 1
    assert len(sink.tally.differences) == 4
    assert all("left alone" in line for line in sink.tally.differences)
    assert (await stores.agents.get(TENANT, "agent-1")) == agent("agent-1")
    assert (await stores.runs.get(TENANT, "agent-1", "run-1")) == run("run-1", "agent-1")
    assert await stores.checkpoints.get(TENANT, "agent-1", "b1") == b"\x00blob bytes"
    events = await stores.run_events.list(TENANT, "run-1", after_seq=0, limit=100)
    assert events[0]["payload"] == {"n": 1}


async def test_overwrite_replaces_documents_blobs_and_rewrites_a_log(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "PAGE", 2)
    await write_all(StoreSink(stores, overwrite=False), history(events=9))
    source = [stored("run-1", s, key=f"k{s}", payload={"n": s}) for s in range(1, 12)]
    source[6] = stored("run-1", 7, key="k7", payload="changed")
    changed: list[Item] = [
        AgentItem(TENANT, agent("agent-1", name="renamed")),
        RunItem(TENANT, run("run-1", "agent-1", status="finished")),
        EventsItem(TENANT, "run-1", source[:6]),
        EventsItem(TENANT, "run-1", source[6:9]),
        EventsItem(TENANT, "run-1", source[9:]),
        blob("agent-1", "b1", b"other bytes"),
        blob("agent-1", "gone", None),
    ]
    sink = StoreSink(stores, overwrite=True)
    await write_all(sink, changed)
    assert sink.tally.counts["runEvents"] == {
        Outcome.SAME: 8,
        Outcome.REPLACED: 1,
        Outcome.CREATED: 2,
    }
    assert sink.tally.counts["checkpoints"] == {Outcome.REPLACED: 1, Outcome.VANISHED: 1}
    assert await stores.agents.get(TENANT, "agent-1") == agent("agent-1", name="renamed")
    assert await stores.runs.get(TENANT, "agent-1", "run-1") == run(
        "run-1", "agent-1", status="finished"
    )
    assert await stores.checkpoints.get(TENANT, "agent-1", "b1") == b"other bytes"
    assert await stores.run_events.list(TENANT, "run-1", after_seq=0, limit=100) == source
    appended = await stores.run_events.append(
        TENANT, {"runId": "run-1", "eventType": "t", "idempotencyKey": "k7"}
    )
    assert appended == source[6]
