"""S3 under contention and refusal: racing creates, endless conflicts, AccessDenied.

- Creates of one id racing from several backends (each its own client, as separate
  servers would be): exactly one wins, every other gets ``already_exists``, and the
  stored document, its index entries and the lists are the winner's alone.
- A conditional write that always loses (the test server answers every conditional
  PUT 412, as if other writers always won) gives up after the bounded number of
  attempts with ``unavailable``, leaving nothing half-written behind.
- A bucket that refuses access (403 AccessDenied) stops the start with one line
  naming the bucket and the refusal, and calls answer ``unavailable`` saying so.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, agent, list_all, run
from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store.stack.stores import Routes, open_stores
from bridge_store_s3 import _index, checkpoints, events
from bridge_store_s3.backend import S3Backend
from bridge_store_s3.keys import Layout
from bridge_store_s3.settings import parse_url
from testkit.services import S3Server
from tests.support.s3 import MakeS3Url
from tests.support.server import serve

pytestmark = pytest.mark.s3

RACERS = 6
#: Attempts before a conflicting write gives up, cut from 50 so the test is quick.
CONFLICT_LIMIT = 3

OpenClient = Callable[[str], Awaitable[StoreClient]]


@pytest.fixture
async def open_client() -> AsyncIterator[OpenClient]:
    """Opens the store at a URL as its own server would (one client per call)."""
    opened: list[Any] = []

    async def open_(url: str) -> StoreClient:
        manager = get_plugin_manager()
        stores = await open_stores(manager, Routes.single(url), migrate=True)
        opened.append(stores)
        return StoreClient(stores=stores.stores, manager=manager)

    yield open_
    for stores in opened:
        await stores.close()


async def race(
    clients: list[StoreClient], substore: str, method: str, inputs: list[Any]
) -> list[Any]:
    """Every client makes its call at once; results or ConnectErrors, in order."""
    return await asyncio.gather(
        *(
            client.call(substore, method, data)
            for client, data in zip(clients, inputs, strict=True)
        ),
        return_exceptions=True,
    )


def one_winner(results: list[Any]) -> int:
    """The index of the one call that succeeded; every other one is already_exists."""
    winners = [i for i, result in enumerate(results) if not isinstance(result, BaseException)]
    assert len(winners) == 1, results
    for i, result in enumerate(results):
        if i != winners[0]:
            assert isinstance(result, ConnectError), result
            assert result.code == Code.ALREADY_EXISTS, result
    return winners[0]


async def test_racing_creates_of_one_id_have_one_winner(
    open_client: OpenClient, make_s3_url: MakeS3Url, s3_server: S3Server
) -> None:
    url = make_s3_url()
    clients = [await open_client(url) for _ in range(RACERS)]

    # Agents: each racer's document differs (its name and cwd), so the stored one names
    # the winner; the cwd index must list it under the winner's cwd only.
    agents = [agent("contested", name=f"racer {n}", cwd=f"/work/{n}") for n in range(RACERS)]
    winner = one_winner(await race(clients, "agents", "create", [{"agent": a} for a in agents]))
    assert await clients[0].call("agents", "get", {"agentId": "contested"}) == agents[winner]
    assert await list_all(clients[1], "agents", {}) == [agents[winner]]
    for n in range(RACERS):
        listed = await list_all(clients[2], "agents", {"cwd": f"/work/{n}"})
        assert listed == ([agents[winner]] if n == winner else [])

    runs = [run("contested", "agent-1", turn_number=n + 1) for n in range(RACERS)]
    winner = one_winner(await race(clients, "runs", "create", [{"run": r} for r in runs]))
    stored_run = {"agentId": "agent-1", "runId": "contested"}
    assert await clients[3].call("runs", "get", stored_run) == runs[winner]
    assert await list_all(clients[4], "runs", {}) == [runs[winner]]

    blobs = [secrets.token_bytes(1000 + n) for n in range(RACERS)]
    inputs = [
        {"agentId": "agent-1", "blobId": "contested", "data": base64.b64encode(b).decode()}
        for b in blobs
    ]
    winner = one_winner(await race(clients, "checkpoints", "create", inputs))
    found = await clients[5].call(
        "checkpoints", "get", {"agentId": "agent-1", "blobId": "contested"}
    )
    assert base64.b64decode(found["data"]) == blobs[winner]
    assert await list_all(clients[0], "checkpoints", {}) == ["contested"]

    # The losers' index entries were taken back: one live entry per index position.
    prefix = parse_url(url).prefix
    layout = Layout(prefix)
    assert len(s3_server.keys(layout.agents_order())) == 1
    assert len(s3_server.keys(layout.blobs_order())) == 1


@pytest.fixture
def conflict_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    for module in (_index, checkpoints, events):
        monkeypatch.setattr(module, "MAX_CONFLICTS", CONFLICT_LIMIT)
    return CONFLICT_LIMIT


async def test_writes_that_always_conflict_give_up_as_unavailable(
    open_client: OpenClient, private_s3_server: S3Server, conflict_limit: int
) -> None:
    url = private_s3_server.url(f"conflicts-{secrets.token_hex(6)}/")
    client = await open_client(url)
    await client.call("agents", "create", {"agent": agent("existing")})
    blob = {"agentId": "agent-1", "blobId": "b", "data": "AAAA"}
    await client.call("checkpoints", "create", blob)
    layout = Layout(parse_url(url).prefix)
    before = private_s3_server.keys(layout.prefix)

    private_s3_server.conflicting = True
    calls: list[tuple[str, str, Any]] = [
        ("agents", "create", {"agent": agent("new")}),
        ("agents", "update", {"agent": agent("existing", updated_at=2)}),
        ("runs", "create", {"run": run("r")}),
        ("checkpoints", "create", {**blob, "blobId": "c"}),
        ("checkpoints", "update", {**blob, "data": "BBBB"}),
        ("runEvents", "append", {"runId": "r", "eventType": "t"}),
        ("runEvents", "append", {"runId": "r", "eventType": "t", "idempotencyKey": "k"}),
    ]
    for substore, method, data in calls:
        requests = private_s3_server.requests
        async with asyncio.timeout(60):  # an unbounded retry loop fails, not hangs
            error = await client.error(substore, method, data)
        assert error.code == Code.UNAVAILABLE, (substore, method, error)
        assert "try again" in error.message
        # Bounded: a handful of requests per attempt, never an endless loop.
        assert private_s3_server.requests - requests <= 8 * conflict_limit
    private_s3_server.conflicting = False

    # Nothing the refused writes began is visible, and the old data is intact.
    assert await client.call("agents", "get", {"agentId": "new"}) is None
    assert (await client.call("agents", "get", {"agentId": "existing"}))["updatedAt"] == 1000
    assert await list_all(client, "agents", {}) == [agent("existing")]
    assert await list_all(client, "runs", {}) == []
    assert await client.call("checkpoints", "get", blob) == {"found": True, "data": "AAAA"}
    assert await list_all(client, "checkpoints", {}) == ["b"]
    assert (await client.call("runEvents", "list", {"runId": "r"}))["items"] == []
    # And the store works again once writes can win.
    appended = await client.call("runEvents", "append", {"runId": "r", "eventType": "t"})
    assert appended["seq"] == 1
    assert set(before) <= set(private_s3_server.keys(layout.prefix))


async def test_a_bucket_that_refuses_access(private_s3_server: S3Server) -> None:
    url = private_s3_server.url(f"denied-{secrets.token_hex(6)}/", max_attempts="2")
    backend = S3Backend(parse_url(url))
    await backend.start(migrate=True)
    try:
        assert backend.agents is not None
        await backend.agents.create("default", agent("a"))
        private_s3_server.denied = True
        with pytest.raises(ConnectError) as caught:
            await backend.agents.get("default", "a")
        assert caught.value.code == Code.UNAVAILABLE
        assert "AccessDenied" in caught.value.message, caught.value.message
    finally:
        await backend.close()

    refused = S3Backend(parse_url(url))
    with pytest.raises(ConfigurationError, match="cannot list bucket 'bridge-store-test'") as why:
        await refused.start(migrate=True)
    assert "AccessDenied" in str(why.value), why.value


def test_serve_answers_unavailable_while_access_is_denied(private_s3_server: S3Server) -> None:
    url = private_s3_server.url(f"denied-{secrets.token_hex(6)}/", max_attempts="2")
    with serve("--store", url) as server:
        server.call("agents", "create", {"agent": agent("a")})
        private_s3_server.denied = True
        for substore, method, data in (
            ("agents", "get", {"agentId": "a"}),
            ("agents", "create", {"agent": agent("b")}),
            ("runEvents", "append", {"runId": "r", "eventType": "t"}),
        ):
            with pytest.raises(ConnectError) as caught:
                server.call(substore, method, data)
            assert caught.value.code == Code.UNAVAILABLE
        private_s3_server.denied = False
        assert server.call("agents", "get", {"agentId": "a"}) == agent("a")
        assert server.process.poll() is None
