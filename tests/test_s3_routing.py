"""Per-substore routing with S3: the typical deployment (``--store postgresql://...
--checkpoints s3://...``) and mixed routes pass the conformance suite, and two
``bridge-store serve`` processes on one bucket keep a run's seqs gapless."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance import StoreConformance
from bridge_store.conformance.harness import StoreClient, agent, run
from bridge_store.stack.stores import Routes, open_stores
from bridge_store_s3.settings import parse_url
from testkit.services import S3Server
from tests.support.postgres import emptied
from tests.support.s3 import MakeS3Url
from tests.support.server import ServerProcess, serve

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def postgres_database(make_migrated_postgres_url: Callable[[], str]) -> str:
    """One database for the module, emptied before each test: creating one per test
    would cost more than the tests."""
    return make_migrated_postgres_url()


async def routed_client(routes: Routes) -> AsyncIterator[StoreClient]:
    manager = get_plugin_manager()
    opened = await open_stores(manager, routes, migrate=True)
    try:
        yield StoreClient(stores=opened.stores, manager=manager)
    finally:
        await opened.close()


@pytest.mark.postgres
class TestPostgresWithS3Checkpoints(StoreConformance):
    """The typical deployment: rows in Postgres, checkpoint blobs in a bucket."""

    @pytest.fixture
    async def client(
        self, postgres_database: str, make_s3_url: MakeS3Url
    ) -> AsyncIterator[StoreClient]:
        database = emptied(postgres_database)
        routes = Routes(
            agents=database, runs=database, run_events=database, checkpoints=make_s3_url()
        )
        async for client in routed_client(routes):
            yield client


class TestS3InterleavedWithSqlite(StoreConformance):
    """Any substore to any backend: S3 (two prefixes) and SQLite, alternating."""

    @pytest.fixture
    async def client(self, make_s3_url: MakeS3Url, tmp_path: Path) -> AsyncIterator[StoreClient]:
        sqlite = f"sqlite:///{tmp_path / 'store.db'}"
        routes = Routes(
            agents=make_s3_url(), runs=sqlite, run_events=make_s3_url(), checkpoints=sqlite
        )
        async for client in routed_client(routes):
            yield client


# -- through `bridge-store serve` -----------------------------------------------------


def agent_life(server: ServerProcess, blob: bytes) -> None:
    """What the bridge does for one agent and one turn, then deletes it all."""
    doc = agent("agent-1", cwd="/home/user/project")
    assert server.call("agents", "get", {"agentId": "agent-1"}) is None
    assert server.call("agents", "create", {"agent": doc}) == doc
    assert server.call("runs", "create", {"run": run("run-1", "agent-1")})["runId"] == "run-1"
    for step in range(3):
        appended = server.call(
            "runEvents",
            "append",
            {"runId": "run-1", "eventType": "run_stream_event", "idempotencyKey": f"k{step}"},
        )
        assert appended["seq"] == step + 1
    data = base64.b64encode(blob).decode()
    server.call("checkpoints", "create", {"agentId": "agent-1", "blobId": "root", "data": data})
    latest = {"schemaVersion": 1, "rootBlobId": "root"}
    server.call("agents", "update", {"agent": {**doc, "latestCheckpoint": latest}})
    listed = server.call("runs", "list", {"filter": {"agentIds": ["agent-1"]}})
    assert [item["runId"] for item in listed["items"]] == ["run-1"]
    got = server.call("checkpoints", "get", {"agentId": "agent-1", "blobId": "root"})
    assert got == {"found": True, "data": data}


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_store_with_s3_checkpoints_serves_end_to_end(
    postgres_database: str, make_s3_url: MakeS3Url, s3_server: S3Server
) -> None:
    database, bucket_url = emptied(postgres_database), make_s3_url()
    blob = os.urandom(4 * 1024 * 1024)
    with serve("--store", database, "--checkpoints", bucket_url) as server:
        agent_life(server, blob)

    # Each backend holds exactly its part: the bucket only blobs, Postgres the rest.
    prefix = parse_url(bucket_url).prefix
    kinds = {key.removeprefix(prefix).split("/")[0] for key in s3_server.keys(prefix)}
    assert kinds == {"bridge-store.json", "ckpt"}
    assert (
        s3_server.client()
        .get_object(
            Bucket=parse_url(bucket_url).bucket, Key=prefix + "ckpt/blob/6167656e742d31/726f6f74"
        )["Body"]
        .read()
        == blob
    )
    with serve("--store", database) as postgres_only:
        assert postgres_only.call("agents", "get", {"agentId": "agent-1"})["cwd"]
        assert postgres_only.call(
            "checkpoints", "get", {"agentId": "agent-1", "blobId": "root"}
        ) == {"found": False}

    # The bridge's deletion of the agent, through the routed server again.
    with serve("--store", database, "--checkpoints", bucket_url) as server:
        server.call("runs", "delete", {"filter": {"agentIds": ["agent-1"]}})
        server.call("runEvents", "delete", {"filter": {"runIds": ["run-1"]}})
        server.call("checkpoints", "delete", {"filter": {"agentIds": ["agent-1"]}})
        server.call("agents", "delete", {"filter": {"agentIds": ["agent-1"]}})
        assert server.call("agents", "list", {}) == {"items": []}
    assert [key.removeprefix(prefix) for key in s3_server.keys(prefix)] == ["bridge-store.json"]


@pytest.mark.slow
def test_s3_alone_serves_end_to_end(make_s3_url: MakeS3Url) -> None:
    with serve("--store", make_s3_url()) as server:
        agent_life(server, os.urandom(1024 * 1024))


@pytest.mark.slow
def test_racing_appends_from_two_servers_on_one_bucket_are_gapless(
    make_s3_url: MakeS3Url,
) -> None:
    url = make_s3_url()
    per_server, keyed = 40, 8
    with serve("--store", url) as first, serve("--store", url) as second:

        def append(index: int) -> dict[str, Any]:
            server = first if index % 2 else second
            data: dict[str, Any] = {"runId": "hot", "eventType": "t", "payload": index}
            if index >= 2 * per_server:
                # Both servers append each idempotency key: one event per key.
                data["idempotencyKey"] = f"key-{index % keyed}"
            result: dict[str, Any] = server.call("runEvents", "append", data)
            return result

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(append, range(2 * per_server + 4 * keyed)))

        events: list[dict[str, Any]] = []
        offset = "0"
        while True:
            page = first.call("runEvents", "list", {"runId": "hot", "afterOffset": offset})
            events += page["items"]
            if "nextOffset" not in page:
                break
            offset = page["nextOffset"]

    total = 2 * per_server + keyed
    assert [event["seq"] for event in events] == list(range(1, total + 1))
    assert sorted({result["seq"] for result in results}) == list(range(1, total + 1))
    by_seq = {event["seq"]: event for event in events}
    assert all(by_seq[result["seq"]] == result for result in results)
    keys = [event["idempotencyKey"] for event in events if event["idempotencyKey"] is not None]
    assert sorted(keys) == sorted(f"key-{n}" for n in range(keyed))
