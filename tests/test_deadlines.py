"""Writes cut off by the request deadline: stored or not, never half-stored.

A client sends ``Connect-Timeout-Ms``; when the time runs out the server answers
``deadline_exceeded`` (504) and stops waiting for the store. On each backend the
test holds the writes up on their way (SQLite: another process holds the write lock;
Postgres: another session holds the tables' locks; Redis: the server pauses writing
clients; S3: the object PUTs are held at the bucket), sends an append, a blob and an
agent update with a short deadline, and releases the obstacle only after the 504s.
Whatever each write then did, the store holds it whole or not at all: the event log
has no gap, the blob is byte-exact or absent, the agent is the old or the new
document in both its read and its list, and the server serves on.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.conformance.harness import agent
from testkit.services import S3Server

from .support.redis import RedisServer
from .support.server import CALL_STORE_PATH, ServerProcess, serve

DEADLINE_MS = 1000
#: How long the test waits for an obstacle to be in place, or a thread to finish.
WAIT_SECONDS = 60.0
BLOB = os.urandom(1024 * 1024)
OLD_AGENT = agent("agent", updated_at=1)
NEW_AGENT = agent("agent", updated_at=2, name="updated")


def call_with_deadline(
    server: ServerProcess, substore: str, method: str, data: Any
) -> httpx.Response:
    return httpx.post(
        server.url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={
            "Authorization": f"Bearer {server.token}",
            "Connect-Timeout-Ms": str(DEADLINE_MS),
        },
        timeout=WAIT_SECONDS,
    )


def prepare(server: ServerProcess) -> None:
    server.call("agents", "create", {"agent": OLD_AGENT})
    server.call("runEvents", "append", {"runId": "run", "eventType": "before"})


def cut_off_writes(server: ServerProcess) -> None:
    """The three writes, each answered deadline_exceeded while the store is held up."""
    blob = {"agentId": "agent", "blobId": "blob", "data": base64.b64encode(BLOB).decode()}
    for substore, method, data in (
        ("runEvents", "append", {"runId": "run", "eventType": "cut off"}),
        ("checkpoints", "create", blob),
        ("agents", "update", {"agent": NEW_AGENT}),
    ):
        response = call_with_deadline(server, substore, method, data)
        assert response.status_code == 504, (substore, method, response.text)
        assert response.json()["code"] == "deadline_exceeded"


def settle(condition: Callable[[], bool]) -> None:
    """Writes the server gave up on may still land a moment after the release."""
    for _ in range(100):
        if condition():
            return
        threading.Event().wait(0.05)


def assert_whole_or_absent(server: ServerProcess) -> None:
    events = server.events("run")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["eventType"] for e in events] in (["before"], ["before", "cut off"])
    appended = server.call("runEvents", "append", {"runId": "run", "eventType": "after"})
    assert appended["seq"] == len(events) + 1

    found = server.call("checkpoints", "get", {"agentId": "agent", "blobId": "blob"})
    listed = server.call("checkpoints", "list", {"filter": {}})["items"]
    if found["found"]:
        assert base64.b64decode(found["data"]) == BLOB
        assert listed == ["blob"]
    else:
        assert listed == []
        server.call("checkpoints", "create", {"agentId": "agent", "blobId": "blob", "data": "AAAA"})

    stored = server.call("agents", "get", {"agentId": "agent"})
    assert stored in (OLD_AGENT, NEW_AGENT)
    assert server.call("agents", "list", {"filter": {}})["items"] == [stored]
    assert server.call("agents", "update", {"agent": NEW_AGENT}) == NEW_AGENT
    assert server.process.poll() is None


# -- the obstacles ---------------------------------------------------------------------


@contextmanager
def sqlite_write_lock(path: Path) -> Iterator[None]:
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextmanager
def postgres_table_locks(url: str) -> Iterator[None]:
    import asyncpg  # type: ignore[import-untyped]

    locked, release = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def hold() -> None:
        connection = await asyncpg.connect(url)
        try:
            async with connection.transaction():
                await connection.execute(
                    "LOCK TABLE agents, run_event_counters, run_events, checkpoint_blobs "
                    "IN ACCESS EXCLUSIVE MODE"
                )
                locked.set()
                await asyncio.to_thread(release.wait, WAIT_SECONDS)
        finally:
            await connection.close()

    def run() -> None:
        try:
            asyncio.run(hold())
        except BaseException as error:
            failure.append(error)
            locked.set()

    holder = threading.Thread(target=run)
    holder.start()
    try:
        assert locked.wait(WAIT_SECONDS)
        assert not failure, failure
        yield
    finally:
        release.set()
        holder.join(WAIT_SECONDS)


@contextmanager
def redis_paused(server: RedisServer) -> Iterator[None]:
    with server.client() as client:
        # Writing clients (scripts included) wait; the pause ends at UNPAUSE.
        client.execute_command("CLIENT", "PAUSE", str(int(WAIT_SECONDS * 1000)), "WRITE")
        try:
            yield
        finally:
            client.execute_command("CLIENT", "UNPAUSE")


@contextmanager
def s3_objects_held(server: S3Server) -> Iterator[None]:
    def documents(environ: dict[str, Any]) -> bool:
        path = str(environ.get("PATH_INFO", ""))
        is_put = environ["REQUEST_METHOD"] == "PUT"
        return is_put and any(part in path for part in ("/doc/", "/ckpt/blob/", "/events/"))

    server.released.clear()
    server.held.clear()
    server.hold = documents
    try:
        yield
        # The writes reached the bucket and were still on their way at the deadline.
        assert server.held.is_set()
    finally:
        server.hold = None
        server.released.set()


# -- the tests -------------------------------------------------------------------------


def test_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with serve("--store", f"sqlite:///{path}?busy_timeout=60000") as server:
        prepare(server)
        with sqlite_write_lock(path):
            cut_off_writes(server)
        # SQLite cannot drop work a thread has begun: the writes run once the lock goes.
        settle(lambda: len(server.events("run")) == 2)
        assert_whole_or_absent(server)


@pytest.mark.postgres
def test_postgres(make_migrated_postgres_url: Callable[[], str]) -> None:
    url = make_migrated_postgres_url()
    with serve("--store", url) as server:
        prepare(server)
        with postgres_table_locks(url):
            cut_off_writes(server)
        assert_whole_or_absent(server)


@pytest.mark.redis
def test_redis(redis_server: RedisServer) -> None:
    with serve("--store", redis_server.url + "?prefix=deadlines") as server:
        prepare(server)
        with redis_paused(redis_server):
            cut_off_writes(server)
        assert_whole_or_absent(server)


@pytest.mark.s3
def test_s3(private_s3_server: S3Server) -> None:
    url = private_s3_server.url("deadlines/")
    with serve("--store", url) as server:
        prepare(server)
        with s3_objects_held(private_s3_server):
            cut_off_writes(server)
        assert_whole_or_absent(server)
