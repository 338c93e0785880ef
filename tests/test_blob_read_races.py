"""A write racing a large blob's read never answers a torn blob, on Redis and on S3.

Redis reads a blob over 1 MiB in ``GETRANGE`` pieces on one connection under ``WATCH``
(bridge_store_redis/blob_reads.py): pieces read across a write are thrown away and read
again. S3 streams the body of one GET (bridge_store_s3/blob_reads.py), which is one
version of the object whatever is written meanwhile. Each race is made to happen at a
known point (a write between two pieces), then left to chance with a writer beside
readers; with encryption at rest too, where a torn blob would not even open.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.security.encryption import Keyring
from bridge_store.security.sealed_stores import seal_stores
from bridge_store.stack.stores import Routes, Stores, open_stores
from bridge_store_redis import blob_reads as redis_reads
from bridge_store_s3 import _bucket
from bridge_store_s3 import blob_reads as s3_reads

MIB = 1024 * 1024
#: Four pieces on Redis, four or more on S3: a write can fall between any two.
BLOB_BYTES = 3 * MIB + 12_345
OLD, NEW, NEWER = (os.urandom(BLOB_BYTES) for _ in range(3))
KEY = os.urandom(32)
TENANT = DEFAULT_TENANT

Between = Callable[[Stores], Awaitable[None]]


def redis_url(backend: str, request: pytest.FixtureRequest) -> str:
    fixture = {"redis": "make_redis_url", "redis-cluster": "make_cluster_url"}[backend]
    url: str = request.getfixturevalue(fixture)()
    return url


@asynccontextmanager
async def stores_at(url: str, sealed: bool) -> AsyncIterator[Stores]:
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        yield seal_stores(opened.stores, Keyring([KEY])) if sealed else opened.stores
    finally:
        await opened.close()


def write_between_redis_pieces(
    monkeypatch: pytest.MonkeyPatch, stores: Stores, writes: list[Between]
) -> list[int]:
    """Run ``writes`` one per read, each as the read asks for its third piece (its first
    two are asked for already, so without a check the read would be half old, half new).
    Returns the number of reads that began, as a list that grows."""
    send = redis_reads._send
    reads: list[int] = []

    async def send_after_writing(connection: Any, *commands: tuple[Any, ...]) -> None:
        for command in commands:
            if command[0] == "GETRANGE" and command[2] == 0:
                reads.append(len(reads))
            third = redis_reads.IN_FLIGHT * redis_reads.PIECE_BYTES
            if command[0] == "GETRANGE" and command[2] == third and len(writes) >= len(reads):
                await writes[len(reads) - 1](stores)
        await send(connection, *commands)

    monkeypatch.setattr(redis_reads, "_send", send_after_writing)
    return reads


def update(data: bytes) -> Between:
    async def write(stores: Stores) -> None:
        await stores.checkpoints.update(TENANT, "a", "b", data)

    return write


async def delete(stores: Stores) -> None:
    await stores.checkpoints.delete(TENANT, ["a"], ["b"])


REDIS = ["redis", "redis-cluster"]
pytestmark = pytest.mark.slow


@pytest.mark.redis
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("backend", REDIS)
async def test_redis_an_update_between_two_pieces_is_read_again_whole(
    backend: str, sealed: bool, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with stores_at(redis_url(backend, request), sealed) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        reads = write_between_redis_pieces(monkeypatch, stores, [update(NEW)])
        assert await stores.checkpoints.get(TENANT, "a", "b") == NEW
        assert len(reads) == 2  # the first read's pieces were thrown away


@pytest.mark.redis
@pytest.mark.parametrize("backend", REDIS)
async def test_redis_a_delete_between_two_pieces_answers_none(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with stores_at(redis_url(backend, request), sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        write_between_redis_pieces(monkeypatch, stores, [delete])
        assert await stores.checkpoints.get(TENANT, "a", "b") is None


@pytest.mark.redis
@pytest.mark.parametrize("backend", REDIS)
async def test_redis_a_blob_cut_small_between_two_pieces_is_read_whole(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with stores_at(redis_url(backend, request), sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        write_between_redis_pieces(monkeypatch, stores, [update(b"small now")])
        assert await stores.checkpoints.get(TENANT, "a", "b") == b"small now"


@pytest.mark.redis
@pytest.mark.parametrize("backend", REDIS)
async def test_redis_a_blob_rewritten_during_every_read_is_read_whole_in_one_get(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with stores_at(redis_url(backend, request), sealed=False) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        versions = [NEW, NEWER] * redis_reads.ATTEMPTS
        writes = [update(data) for data in versions[: redis_reads.ATTEMPTS]]
        reads = write_between_redis_pieces(monkeypatch, stores, writes)
        got = await stores.checkpoints.get(TENANT, "a", "b")
        assert len(reads) == redis_reads.ATTEMPTS
        assert got == versions[redis_reads.ATTEMPTS - 1]  # the last written, whole


async def readers_beside_a_writer(stores: Stores, rounds: int) -> list[bytes | None]:
    """Readers of the blob while a writer flips it between OLD and NEW; what they read."""
    done = asyncio.Event()
    seen: list[bytes | None] = []

    async def write() -> None:
        for number in range(rounds):
            await stores.checkpoints.update(TENANT, "a", "b", (NEW, OLD)[number % 2])
            await asyncio.sleep(0)
        done.set()

    async def read() -> None:
        while not done.is_set():
            seen.append(await stores.checkpoints.get(TENANT, "a", "b"))

    await asyncio.gather(write(), read(), read())
    return seen


@pytest.mark.redis
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("backend", REDIS)
async def test_redis_readers_beside_a_writer_read_only_whole_versions(
    backend: str, sealed: bool, request: pytest.FixtureRequest
) -> None:
    async with stores_at(redis_url(backend, request), sealed) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        seen = await readers_beside_a_writer(stores, rounds=30)
        assert seen
        assert all(data in (OLD, NEW) for data in seen)


class PausedStream:
    """A GET's result whose body stream lets ``between`` run after its first piece."""

    def __init__(self, result: Any, between: Callable[[], Awaitable[None]]) -> None:
        self._result = result
        self._between = between
        self.meta = result.meta
        self.pieces = 0

    async def bytes_async(self) -> Any:
        return await self._result.bytes_async()

    def stream(self, min_chunk_size: int) -> AsyncIterator[bytes]:
        return self._pieces(min_chunk_size)

    async def _pieces(self, min_chunk_size: int) -> AsyncIterator[bytes]:
        async for piece in self._result.stream(min_chunk_size=min_chunk_size):
            self.pieces += 1
            yield piece
            if self.pieces == 1:
                await self._between()


@pytest.mark.s3
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("write", ["update", "delete"])
async def test_s3_a_write_while_the_body_streams_leaves_the_read_whole(
    write: str, sealed: bool, make_s3_url: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with stores_at(make_s3_url(), sealed) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        streams: list[PausedStream] = []

        async def between() -> None:
            await (update(NEW) if write == "update" else delete)(stores)

        async def read_paused(result: Any) -> bytes:
            streams.append(PausedStream(result, between))
            return await s3_reads.read_body(streams[-1])  # type: ignore[arg-type]

        monkeypatch.setattr(_bucket, "read_body", read_paused)
        assert await stores.checkpoints.get(TENANT, "a", "b") == OLD
        assert len(streams) == 1
        assert streams[0].pieces >= 2  # the write came between two pieces
        monkeypatch.undo()
        after = await stores.checkpoints.get(TENANT, "a", "b")
        assert after == (NEW if write == "update" else None)


@pytest.mark.s3
@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
async def test_s3_readers_beside_a_writer_read_only_whole_versions(
    sealed: bool, make_s3_url: Callable[..., str]
) -> None:
    async with stores_at(make_s3_url(), sealed) as stores:
        await stores.checkpoints.create(TENANT, "a", "b", OLD)
        seen = await readers_beside_a_writer(stores, rounds=12)
        assert seen
        assert all(data in (OLD, NEW) for data in seen)
