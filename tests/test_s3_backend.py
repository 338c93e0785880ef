"""S3 backend behaviour the conformance suite cannot see: the bucket layout, crash
leftovers, lost responses, racing processes (two backends on one prefix) and the
number of S3 requests the hot paths cost."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

import bridge_store_s3._index as index_module
from bridge_store.conformance.harness import agent, run
from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store.rpc.contract import new_event
from bridge_store.types import Document
from bridge_store_s3._bucket import Bucket
from bridge_store_s3.backend import S3Backend
from bridge_store_s3.errors import PreconditionFailed
from bridge_store_s3.keys import Layout
from bridge_store_s3.settings import parse_url
from testkit.services import S3_BUCKET, S3Server
from tests.support.s3 import MakeS3Url

pytestmark = pytest.mark.s3

OpenS3 = Callable[[str], Awaitable[S3Backend]]


@pytest.fixture
async def open_s3() -> AsyncIterator[OpenS3]:
    """Opens (and at teardown closes) backends; two on one URL act as two processes."""
    opened: list[S3Backend] = []

    async def open_(url: str) -> S3Backend:
        backend = S3Backend(parse_url(url))
        await backend.start(migrate=True)
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        await backend.close()


@pytest.fixture
def url(make_s3_url: MakeS3Url) -> str:
    return make_s3_url()


@pytest.fixture
def layout(url: str) -> Layout:
    return Layout(parse_url(url).prefix)


@pytest.fixture
async def store(open_s3: OpenS3, url: str) -> S3Backend:
    return await open_s3(url)


def event(run_id: str, key: str | None = None, payload: Any = None) -> Document:
    return new_event(
        {"runId": run_id, "eventType": "t", "payload": payload, "idempotencyKey": key}, "input"
    )


def put_raw(server: S3Server, key: str, body: bytes) -> None:
    server.client().put_object(Bucket=S3_BUCKET, Key=key, Body=body)


def get_raw(server: S3Server, key: str) -> bytes:
    body: bytes = server.client().get_object(Bucket=S3_BUCKET, Key=key)["Body"].read()
    return body


# -- layout ---------------------------------------------------------------------------


async def test_bucket_layout(store: S3Backend, s3_server: S3Server, layout: Layout) -> None:
    await store.agents.create("default", agent("a1", cwd="/w"))
    await store.runs.create("default", run("r1", "a1", turn_number=3))
    await store.run_events.append("default", event("r1", key="k1"))
    await store.checkpoints.create("default", "a1", "b1", b"\x00raw\xff")
    # Index entries end with a random rev; everything else is fixed by the ids.
    shapes = sorted(
        key if key.startswith("events/") else re.sub("[0-9a-f]{16}$", "<rev>", key)
        for key in (key.removeprefix(layout.prefix) for key in s3_server.keys(layout.prefix))
    )
    a1, r1, b1, k1 = "6131", "7231", "6231", "6b31"  # hex of "a1", "r1", "b1", "k1"
    a1_descending = "9ece~"  # each byte of "a1" subtracted from 255
    cwd = hashlib.sha256(b"/w").hexdigest()
    updated, turn = f"{2**53 - 1000:017d}", f"{2**53 + 3:017d}"
    assert shapes == sorted(
        [
            "bridge-store.json",
            f"agents/doc/{a1}",
            f"agents/order/{updated}/{a1_descending}<rev>",
            f"agents/cwd/{cwd}/{updated}/{a1_descending}<rev>",
            f"runs/doc/{r1}/{a1}",
            f"runs/order/{turn}/{r1}/{a1}/<rev>",
            f"runs/agent/{a1}/{turn}/{r1}/<rev>",
            f"events/{r1}/e/0000000000000001",
            f"events/{r1}/k/{k1}",
            f"ckpt/blob/{a1}/{b1}",
            f"ckpt/order/{b1}/{a1}/<rev>",
        ]
    )
    # Blobs are the raw bytes; documents and events plain JSON.
    assert get_raw(s3_server, layout.blob("a1", "b1")) == b"\x00raw\xff"
    assert json.loads(get_raw(s3_server, layout.agent_doc("a1"))) == agent("a1", cwd="/w")
    assert json.loads(get_raw(s3_server, layout.event("r1", 1)))["seq"] == 1


async def test_layout_marker(open_s3: OpenS3, s3_server: S3Server, make_s3_url: MakeS3Url) -> None:
    url = make_s3_url()
    prefix = parse_url(url).prefix
    unmigrated = S3Backend(parse_url(url))
    await unmigrated.start(migrate=False)
    try:
        assert await unmigrated.schema_revision() is None
    finally:
        await unmigrated.close()
    store = await open_s3(url)
    assert await store.schema_revision() == "1"
    put_raw(s3_server, prefix + "bridge-store.json", b'{"layout": 2}')
    newer = S3Backend(parse_url(url))
    with pytest.raises(ConfigurationError, match="layout version 2"):
        await newer.start(migrate=True)


async def test_ids_too_long_for_a_key_are_invalid_arguments(store: S3Backend) -> None:
    with pytest.raises(ConnectError) as caught:
        await store.agents.get("default", "x" * 1000)
    assert caught.value.code == Code.INVALID_ARGUMENT


# -- index entries left behind --------------------------------------------------------


async def test_stale_index_entries_are_skipped(
    store: S3Backend, s3_server: S3Server, layout: Layout
) -> None:
    for index in range(4):
        await store.agents.create("default", agent(f"a{index}", updated_at=index))
    await store.runs.create("default", run("r1", "a1"))
    entries_before = set(s3_server.keys(layout.prefix + "agents/order/"))
    await store.agents.update("default", agent("a2", updated_at=10))
    # A crash before the old entry was deleted, and one between entry and document.
    for key in entries_before:
        put_raw(s3_server, key, b"")
    orphan = layout.agents_order() + Layout.agent_position(99, "ghost") + "00000000000000ff"
    put_raw(s3_server, orphan, b"")
    put_raw(
        s3_server, layout.runs_order() + "x" * 0 + f"{2**53:017d}/6768/6131/0000000000000000", b""
    )

    page = await store.agents.list("default", cwd=None, after=None, limit=3)
    assert [doc["agentId"] for doc in page] == ["a2", "a3", "a1"]
    assert page[0]["updatedAt"] == 10
    everything = await store.agents.list("default", cwd=None, after=None, limit=100)
    assert [doc["agentId"] for doc in everything] == ["a2", "a3", "a1", "a0"]
    of_cwd = await store.agents.list("default", cwd="/work/a", after=None, limit=100)
    assert [doc["agentId"] for doc in of_cwd] == ["a2", "a3", "a1", "a0"]
    runs = await store.runs.list("default", agent_ids=None, run_ids=None, after=None, limit=10)
    assert [doc["runId"] for doc in runs] == ["r1"]
    # Young stale entries stay: they could belong to a write still in flight.
    assert orphan in s3_server.keys(layout.prefix + "agents/order/")


async def test_readers_collect_stale_entries_past_the_grace_period(
    store: S3Backend, s3_server: S3Server, layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.agents.create("default", agent("a1"))
    live = set(s3_server.keys(layout.prefix + "agents/order/"))
    orphan = layout.agents_order() + Layout.agent_position(5, "ghost") + "00000000000000ff"
    put_raw(s3_server, orphan, b"")
    monkeypatch.setattr(index_module, "STALE_GRACE", timedelta(minutes=-1))
    assert [
        doc["agentId"] for doc in await store.agents.list("default", cwd=None, after=None, limit=10)
    ] == ["a1"]
    assert set(s3_server.keys(layout.prefix + "agents/order/")) == live


async def test_racing_updates_leave_one_live_entry_per_index(
    open_s3: OpenS3, url: str, s3_server: S3Server, layout: Layout
) -> None:
    first, second = await open_s3(url), await open_s3(url)
    await first.agents.create("default", agent("a1", updated_at=1))
    await asyncio.gather(
        *(
            (first if n % 2 else second).agents.update(
                "default", agent("a1", updated_at=n, cwd=f"/w{n}")
            )
            for n in range(2, 12)
        )
    )
    stored = await first.agents.get("default", "a1")
    assert stored is not None
    listed = await second.agents.list("default", cwd=None, after=None, limit=10)
    assert listed == [stored]
    assert await first.agents.list("default", cwd=stored["cwd"], after=None, limit=10) == [stored]
    # Losers removed their own entries and winners the ones they replaced.
    assert len(s3_server.keys(layout.prefix + "agents/order/")) == 1
    assert len(s3_server.keys(layout.prefix + "agents/cwd/")) == 1


# -- a 412 that answers our own write -------------------------------------------------


def lose_first_response(monkeypatch: pytest.MonkeyPatch, key_part: str) -> list[str]:
    """The first conditional put to a key containing ``key_part`` lands, then answers 412,
    as when a response is lost and botocore's retry meets the write it made."""
    real_put = Bucket.put
    lost: list[str] = []

    async def put(self: Bucket, key: str, body: bytes, **kwargs: Any) -> str:
        etag = await real_put(self, key, body, **kwargs)
        conditional = kwargs.get("if_none_match") or kwargs.get("if_match")
        if conditional and key_part in key and not lost:
            lost.append(key)
            raise PreconditionFailed(key)
        return etag

    monkeypatch.setattr(Bucket, "put", put)
    return lost


async def test_lost_response_on_create_is_not_already_exists(
    store: S3Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = lose_first_response(monkeypatch, "/agents/doc/")
    assert await store.agents.create("default", agent("a1")) == agent("a1")
    assert lost
    assert await store.agents.list("default", cwd=None, after=None, limit=10) == [agent("a1")]


async def test_lost_response_on_update_is_applied_once(
    store: S3Backend, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, layout: Layout
) -> None:
    await store.agents.create("default", agent("a1"))
    lost = lose_first_response(monkeypatch, "/agents/doc/")
    await store.agents.update("default", agent("a1", updated_at=5))
    assert lost
    assert await store.agents.list("default", cwd=None, after=None, limit=10) == [
        agent("a1", updated_at=5)
    ]
    assert len(s3_server.keys(layout.prefix + "agents/order/")) == 1


async def test_lost_response_on_append_stores_one_event(
    store: S3Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = lose_first_response(monkeypatch, "/e/")
    first = await store.run_events.append("default", event("r"))
    second = await store.run_events.append("default", event("r"))
    assert lost
    assert (first["seq"], second["seq"]) == (1, 2)
    assert await store.run_events.list("default", "r", after_seq=0, limit=10) == [first, second]


async def test_lost_response_on_checkpoint_create_is_not_already_exists(
    store: S3Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = lose_first_response(monkeypatch, "/ckpt/blob/")
    await store.checkpoints.create("default", "a", "b", b"data")
    assert lost
    assert await store.checkpoints.get("default", "a", "b") == b"data"


# -- run events -----------------------------------------------------------------------


async def test_two_backends_racing_appends_get_gapless_seqs(open_s3: OpenS3, url: str) -> None:
    # Two backend objects on one event loop, each with its own client: their requests
    # interleave at the bucket as two servers' would. test_s3_routing.py runs the race
    # between two real server processes.
    first, second = await open_s3(url), await open_s3(url)
    results = await asyncio.gather(
        *(
            (first if n % 2 else second).run_events.append("default", event("hot", payload=n))
            for n in range(60)
        )
    )
    assert sorted(e["seq"] for e in results) == list(range(1, 61))
    listed = await first.run_events.list("default", "hot", after_seq=0, limit=100)
    assert [e["seq"] for e in listed] == list(range(1, 61))
    assert sorted(e["payload"] for e in listed) == list(range(60))


async def test_two_backends_racing_one_idempotency_key_store_one_event(
    open_s3: OpenS3, url: str
) -> None:
    first, second = await open_s3(url), await open_s3(url)
    results = await asyncio.gather(
        *(
            (first if n % 2 else second).run_events.append(
                "default", event("r", key=f"k{n % 3}", payload=n)
            )
            for n in range(24)
        )
    )
    listed = await second.run_events.list("default", "r", after_seq=0, limit=100)
    assert [e["seq"] for e in listed] == [1, 2, 3]
    assert sorted(e["idempotencyKey"] for e in listed) == ["k0", "k1", "k2"]
    by_key = {e["idempotencyKey"]: e for e in listed}
    assert all(result == by_key[result["idempotencyKey"]] for result in results)


async def test_a_claim_left_by_a_crashed_appender_is_completed_by_the_retry(
    store: S3Backend, s3_server: S3Server, layout: Layout
) -> None:
    claimed = event("r", key="k", payload="first try")
    put_raw(s3_server, layout.claim("r", "k"), json.dumps({"event": claimed, "seq": 1}).encode())
    retried = await store.run_events.append("default", event("r", key="k", payload="retry"))
    assert retried["payload"] == "first try"
    assert retried["createdAt"] == claimed["createdAt"]
    assert await store.run_events.list("default", "r", after_seq=0, limit=10) == [retried]


async def test_a_claim_whose_seq_was_taken_moves_past_the_end(
    store: S3Backend, s3_server: S3Server, layout: Layout
) -> None:
    claimed = event("r", key="k", payload="claimed")
    put_raw(s3_server, layout.claim("r", "k"), json.dumps({"event": claimed, "seq": 1}).encode())
    other = await store.run_events.append("default", event("r", payload="other"))
    assert other["seq"] == 1
    settled = await store.run_events.append("default", event("r", key="k", payload="retry"))
    assert (settled["seq"], settled["payload"]) == (2, "claimed")
    assert json.loads(get_raw(s3_server, layout.claim("r", "k")))["seq"] == 2
    again = await store.run_events.append("default", event("r", key="k"))
    assert again == settled
    assert [
        e["seq"] for e in await store.run_events.list("default", "r", after_seq=0, limit=10)
    ] == [1, 2]


async def test_a_run_deleted_by_another_process_restarts_at_seq_1(
    open_s3: OpenS3, url: str
) -> None:
    first, second = await open_s3(url), await open_s3(url)
    for _ in range(3):
        await first.run_events.append("default", event("r"))
    await second.run_events.delete("default", ["r"])
    assert (await first.run_events.append("default", event("r")))["seq"] == 1
    assert [
        e["seq"] for e in await second.run_events.list("default", "r", after_seq=0, limit=10)
    ] == [1]


async def test_request_costs_of_the_hot_paths(store: S3Backend, s3_server: S3Server) -> None:
    async def cost(work: Awaitable[Any]) -> int:
        before = s3_server.requests
        await work
        return s3_server.requests - before

    assert await cost(store.run_events.append("default", event("r"))) == 2  # LIST (tail) + PUT
    assert (
        await cost(store.run_events.append("default", event("r"))) == 2
    )  # HEAD (cached tail) + PUT
    assert (
        await cost(store.run_events.append("default", event("r", key="k"))) == 3
    )  # HEAD + claim + PUT
    assert (
        await cost(store.run_events.list("default", "r", after_seq=3, limit=100)) == 1
    )  # GET miss
    assert (
        await cost(store.run_events.list("default", "r", after_seq=1, limit=100)) == 3
    )  # GET, LIST, GET
    assert await cost(store.agents.create("default", agent("a1"))) == 3  # 2 entries + document
    assert await cost(store.agents.update("default", agent("a1", updated_at=7))) == 5
    assert await cost(store.agents.get("default", "a1")) == 1
    assert await cost(store.checkpoints.get("default", "a1", "missing")) == 1
    assert await cost(store.checkpoints.create("default", "a1", "b1", b"blob")) == 2  # entry + blob
    assert await cost(store.checkpoints.update("default", "a1", "b1", b"newer")) == 2  # HEAD + PUT


# -- checkpoints ----------------------------------------------------------------------


async def test_checkpoint_update_keeps_the_blob_listed(store: S3Backend) -> None:
    await store.checkpoints.create("default", "a1", "b1", b"one")
    await store.checkpoints.update("default", "a1", "b1", b"two")
    refs = await store.checkpoints.list(
        "default", agent_ids=None, blob_ids=None, after=None, limit=10
    )
    assert [(ref.agent_id, ref.blob_id) for ref in refs] == [("a1", "b1")]
    assert await store.checkpoints.get("default", "a1", "b1") == b"two"


async def test_checkpoint_ids_with_awkward_characters(store: S3Backend) -> None:
    ids = ["a/b", "a", "a-b", "é", "日本"]
    for agent_id in ids:
        for blob_id in ids:
            await store.checkpoints.create("default", agent_id, blob_id, blob_id.encode())
    everything = await store.checkpoints.list(
        "default", agent_ids=None, blob_ids=None, after=None, limit=100
    )
    assert [(ref.blob_id, ref.agent_id) for ref in everything] == sorted(
        (blob_id, agent_id) for agent_id in ids for blob_id in ids
    )
    two_agents = await store.checkpoints.list(
        "default", agent_ids=["a/b", "a-b"], blob_ids=None, after=everything[3], limit=100
    )
    assert two_agents == [ref for ref in everything[4:] if ref.agent_id in ("a/b", "a-b")]
    await store.checkpoints.delete("default", agent_ids=["a/b"], blob_ids=None)
    assert await store.checkpoints.get("default", "a/b", "a") is None
    assert await store.checkpoints.get("default", "a", "a/b") == b"a/b"
