"""A large blob's read cut off half-way: a clear error or the whole blob, and the next
read is whole again.

Redis reads such a blob in pieces on a connection it holds (bridge_store_redis/
blob_reads.py), with pieces asked for ahead of the one being read: a connection left
half-read would hand its next user the rest of those replies, so a read that ends early
(a reset connection, a cancelled call) must close it. S3 streams the body of one GET
(bridge_store_s3/blob_reads.py). Each read is cut at a known point, between two pieces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from redis.exceptions import AskError, MovedError, TryAgainError

from bridge_store.errors import Code, ConnectError
from bridge_store.stack.stores import Stores
from bridge_store_redis import blob_reads as redis_reads
from bridge_store_s3 import _bucket
from bridge_store_s3 import blob_reads as s3_reads
from testkit.services import S3Server, s3_store_url
from tests.support.proxy import FaultyProxy
from tests.test_backend_timeouts import HUNG_SECONDS, through
from tests.test_blob_read_races import OLD, TENANT, PausedStream, redis_url, stores_at

pytestmark = pytest.mark.slow


def on_third_redis_piece(monkeypatch: pytest.MonkeyPatch, act: Callable[[], Any]) -> list[int]:
    """Await ``act()`` as the first read asks for its third piece; the reads that did."""
    send = redis_reads._send
    acted: list[int] = []

    async def send_after(connection: Any, *commands: tuple[Any, ...]) -> None:
        third = redis_reads.IN_FLIGHT * redis_reads.PIECE_BYTES
        if not acted and any(c[0] == "GETRANGE" and c[2] == third for c in commands):
            acted.append(1)
            await act()
        await send(connection, *commands)

    monkeypatch.setattr(redis_reads, "_send", send_after)
    return acted


@pytest.fixture
def redis_proxy(make_redis_url: Callable[..., str]) -> Iterator[tuple[str, FaultyProxy]]:
    url = make_redis_url()
    target = urlsplit(url)
    proxy = FaultyProxy(target.hostname or "127.0.0.1", target.port or 0)
    try:
        yield through(url, proxy), proxy
    finally:
        proxy.close()


async def outcome(stores: Stores) -> bytes | Code | None:
    """What a get of the blob answers: its bytes, None, or its error's code."""
    try:
        async with asyncio.timeout(HUNG_SECONDS):
            return await stores.checkpoints.get(TENANT, "a", "b")
    except TimeoutError:
        pytest.fail(f"a get hung for {HUNG_SECONDS} s")
    except ConnectError as error:
        return error.code


@pytest.mark.redis
async def test_redis_a_connection_reset_between_pieces_is_unavailable_then_whole(
    redis_proxy: tuple[str, FaultyProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, proxy = redis_proxy
    async with stores_at(url, sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)

        async def reset() -> None:
            proxy.reset()

        acted = on_third_redis_piece(monkeypatch, reset)
        assert await outcome(stores) is Code.UNAVAILABLE
        assert acted
        # The reset connections are found dead and replaced; the pieces are whole.
        for _ in range(10):
            if await outcome(stores) == OLD:
                break
        assert await outcome(stores) == OLD


@pytest.mark.redis
@pytest.mark.parametrize("backend", ["redis", "redis-cluster"])
async def test_redis_a_read_cancelled_between_pieces_leaves_no_replies_to_the_next(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancelled read's connection had pieces asked for and not read: reused, it
    would answer the next command with them. (The standalone pool also drops a
    connection holding bytes it can see unread, but not one whose reply is still on
    its way; the cluster's node pools check nothing: with the connection released
    unclosed, the cluster case answers a piece of the blob for the blob.)"""
    async with stores_at(redis_url(backend, request), sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        waiting = asyncio.Event()

        async def hang() -> None:
            waiting.set()
            await asyncio.Event().wait()

        on_third_redis_piece(monkeypatch, hang)
        read = asyncio.create_task(stores.checkpoints.get(TENANT, "a", "b"))
        await asyncio.wait_for(waiting.wait(), HUNG_SECONDS)
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        # Enough reads to take every connection the pool (or the node) holds in turn.
        for _ in range(8):
            assert await outcome(stores) == OLD
            assert await stores.agents.get(TENANT, "nobody") is None


@pytest.fixture
def s3_proxy(s3_server: S3Server) -> Iterator[tuple[str, FaultyProxy]]:
    target = urlsplit(s3_server.endpoint_url)
    proxy = FaultyProxy(target.hostname or "127.0.0.1", target.port or 0)
    prefix = "blob-read-faults/"
    try:
        yield s3_store_url(f"http://127.0.0.1:{proxy.port}", prefix), proxy
    finally:
        proxy.close()
        s3_server.delete_prefix(prefix)


@pytest.mark.s3
@pytest.mark.parametrize("cut", ["reset", "cancel"])
async def test_s3_a_read_cut_while_the_body_streams_is_whole_or_unavailable(
    cut: str, s3_proxy: tuple[str, FaultyProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, proxy = s3_proxy
    async with stores_at(url, sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        waiting = asyncio.Event()

        async def between() -> None:
            if cut == "reset":
                proxy.reset()
                return
            waiting.set()
            await asyncio.Event().wait()

        async def read_paused(result: Any) -> bytes:
            return await s3_reads.read_body(PausedStream(result, between))  # type: ignore[arg-type]

        monkeypatch.setattr(_bucket, "read_body", read_paused)
        if cut == "reset":
            # The body may have arrived whole before the reset: either is right.
            assert await outcome(stores) in (OLD, Code.UNAVAILABLE)
        else:
            read = asyncio.create_task(stores.checkpoints.get(TENANT, "a", "b"))
            await asyncio.wait_for(waiting.wait(), HUNG_SECONDS)
            read.cancel()
            with pytest.raises(asyncio.CancelledError):
                await read
        monkeypatch.undo()
        assert await outcome(stores) == OLD


@pytest.mark.redis
@pytest.mark.parametrize("answer", ["MOVED", "ASK", "TRYAGAIN"])
async def test_redis_cluster_a_slot_moving_during_a_read_is_read_by_the_clients_get(
    answer: str, make_cluster_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's connection is to the node that held the slot; when the slot moves
    (resharding), redis-py's own GET follows it."""
    async with stores_at(make_cluster_url(), sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        moved = {
            "MOVED": MovedError("1 127.0.0.1:1"),
            "ASK": AskError("1 127.0.0.1:1"),
            "TRYAGAIN": TryAgainError(),
        }[answer]
        sessions: list[int] = []

        async def slot_moved(connection: Any, key: bytes) -> Any:
            sessions.append(1)
            raise moved

        monkeypatch.setattr(redis_reads, "_watched_read", slot_moved)
        assert await outcome(stores) == OLD
        assert sessions == [1]
