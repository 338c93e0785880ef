"""Items moved into a store (copy, import, import-local) get the checks a CallStore call
gets: tenant names, ids, lengths, document shapes, numbers, nesting, blob sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge_store.lifecycle.checks import InvalidItem, checked
from bridge_store.lifecycle.items import AgentItem, BlobItem, EventsItem, Item, RunItem
from bridge_store.lifecycle.sink import StoreSink
from bridge_store.security.encryption import Identity, load_keyring, new_key_line
from bridge_store.types import Document
from tests.support.lifecycle import open_memory, snapshot

GOOD_AGENT: Document = {"agentId": "a", "cwd": "/w", "updatedAt": 1, "createdAt": 1}
GOOD_RUN: Document = {"runId": "r", "agentId": "a", "turnNumber": 1, "status": "finished"}
GOOD_EVENT: Document = {
    "runId": "r",
    "seq": 1,
    "offset": "1",
    "eventType": "e",
    "payload": None,
    "payloadRef": None,
    "idempotencyKey": None,
    "createdAt": 5,
}


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _blob(agent_id: str = "a", blob_id: str = "b", data: bytes = b"x") -> BlobItem:
    async def read() -> bytes:
        return data

    return BlobItem("default", agent_id, blob_id, read)


def _event(**changes: Any) -> EventsItem:
    return EventsItem("default", "r", [{**GOOD_EVENT, **changes}])


INVALID: dict[str, tuple[Item, str]] = {
    "tenant ../../x": (AgentItem("../../x", GOOD_AGENT), "tenant '../../x' must be"),
    "tenant empty": (AgentItem("", GOOD_AGENT), "tenant '' must be"),
    "tenant upper case": (AgentItem("Team", GOOD_AGENT), "tenant 'Team' must be"),
    # The Redis key of issue 21: a tenant whose name closes a hash tag.
    "tenant redis tag": (
        BlobItem("team-a}:blob:Q", "a", "b", _blob().read),
        "tenant 'team-a}:blob:Q' must be",
    ),
    "tenant not a string": (RunItem(5, GOOD_RUN), "a tenant must be a string"),  # type: ignore[arg-type]
    "agent updatedAt yesterday": (
        AgentItem("default", {**GOOD_AGENT, "updatedAt": "yesterday"}),
        "agent.updatedAt must be an integer",
    ),
    "agent not an object": (AgentItem("default", ["a"]), "agent must be an object"),  # type: ignore[arg-type]
    "agent integer id": (
        AgentItem("default", {**GOOD_AGENT, "agentId": 7}),
        "agent.agentId must be a non-empty string",
    ),
    "agent id too long": (
        AgentItem("default", {**GOOD_AGENT, "agentId": "a" * 201}),
        "at most 200 bytes",
    ),
    "agent id lone surrogate": (
        AgentItem("default", {**GOOD_AGENT, "agentId": "\ud800"}),
        "unpaired surrogates",
    ),
    "agent NaN": (
        AgentItem("default", {**GOOD_AGENT, "sdkMetadata": {"x": float("nan")}}),
        "number JSON cannot carry",
    ),
    "agent nested too deep": (
        AgentItem("default", {**GOOD_AGENT, "sdkMetadata": {"x": _nested(100_000)}}),
        "nests deeper than 128 levels",
    ),
    "agent huge updatedAt": (
        AgentItem("default", {**GOOD_AGENT, "updatedAt": 10**30}),
        "agent.updatedAt must be an integer",
    ),
    "run turnNumber text": (
        RunItem("default", {**GOOD_RUN, "turnNumber": "two"}),
        "run.turnNumber must be an integer",
    ),
    "run status object": (
        RunItem("default", {**GOOD_RUN, "status": {}}),
        "run.status must be str or null",
    ),
    "event seq text": (_event(seq="1"), "event.seq must be an integer"),
    "event seq zero": (_event(seq=0, offset="0"), "event.seq must be a positive integer"),
    "event seq beyond 2**53": (_event(seq=2**70, offset=str(2**70)), "event.seq must be"),
    "event offset not its seq": (_event(offset="7"), "event.offset must be the decimal"),
    "event createdAt text": (_event(createdAt="now"), "event.createdAt must be an integer"),
    "event of another run": (_event(runId="q"), "is of another run"),
    "event infinity": (_event(payload=float("inf")), "number JSON cannot carry"),
    "event empty idempotency key": (_event(idempotencyKey=""), "idempotencyKey must be"),
    "blob id with NUL": (_blob(blob_id="b\x00"), "must not contain NUL"),
    "blob agent id empty": (_blob(agent_id=""), "checkpoint.agentId must be a non-empty"),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
async def test_items_get_the_checks_a_callstore_call_gets(case: str) -> None:
    item, message = INVALID[case]
    with pytest.raises(InvalidItem, match="refused") as raised:
        checked(item)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    opened = await open_memory()
    sink = StoreSink(opened.stores, overwrite=True)
    with pytest.raises(InvalidItem):
        await sink.write(item)
    assert await snapshot(opened.stores, ("default", "team-a")) == {}
    await opened.close()


async def test_a_blob_over_the_request_limit_is_refused_by_the_sink() -> None:
    opened = await open_memory()
    sink = StoreSink(opened.stores, overwrite=False, max_blob_bytes=10)
    await sink.write(_blob(data=b"x" * 10))
    with pytest.raises(InvalidItem, match="11 bytes, over the 10-byte request limit"):
        await sink.write(_blob(blob_id="c", data=b"x" * 11))
    assert await opened.stores.checkpoints.get("default", "a", "c") is None
    await opened.close()


def test_valid_items_are_stored_as_a_call_would_store_them() -> None:
    # Integral doubles (what a JavaScript number or a binary call carries) become
    # integers, as the contract makes them; everything else is kept as given.
    agent = checked(AgentItem("default", {**GOOD_AGENT, "updatedAt": 3.0, "extra": [1.5]}))
    assert isinstance(agent, AgentItem)
    assert agent.document == {**GOOD_AGENT, "updatedAt": 3, "extra": [1.5]}
    assert isinstance(agent.document["updatedAt"], int)
    events = checked(_event(seq=1.0, payload={"text": "\ud800\x00"}))
    assert isinstance(events, EventsItem)
    assert events.events[0]["seq"] == 1
    assert isinstance(events.events[0]["seq"], int)


def test_sealed_metadata_travels_as_it_is(tmp_path: Path) -> None:
    """A sealed store copied or exported without its key file hands over sdkMetadata
    sealed: the checks take it as the store holds it, and still check the rest."""
    keys = tmp_path / "keys"
    keys.write_text(new_key_line() + "\n")
    sealed = load_keyring(keys).seal_metadata({"blobEncryptionKey": "k"}, Identity("default", "a"))
    agent = checked(AgentItem("default", {**GOOD_AGENT, "sdkMetadata": sealed}))
    assert isinstance(agent, AgentItem)
    assert agent.document["sdkMetadata"] == sealed
    with pytest.raises(InvalidItem, match=r"agent\.updatedAt must be an integer"):
        checked(AgentItem("default", {**GOOD_AGENT, "sdkMetadata": sealed, "updatedAt": "x"}))
    with pytest.raises(InvalidItem, match=r"agent\.sdkMetadata must be object or null"):
        checked(AgentItem("default", {**GOOD_AGENT, "sdkMetadata": "not sealed"}))
