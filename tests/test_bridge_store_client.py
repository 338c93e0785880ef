"""The bridge's own CallStore client against ``bridge-store serve``, on every store.

The offline bridge never writes a checkpoint blob or a finished run (the stand-in
Cursor API runs no model), so these tests drive the code that would: the callback
store of the bridge vendored in the installed ``cursor-sdk`` (its base64 encoding of
blobs, ``found: false`` read as null, errors thrown as ConnectError), and the SDK's
run and checkpoint bookkeeping on top of it (``createAgentPlatform({localStore})``).
What the store holds is then read back directly over CallStore, byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bridge_js import BridgeCallError, BridgeStoreClient, blob, message, unblob
from tests.support.sdk_versions import (
    TESTED_VERSIONS,
    SdkInstall,
    current_install,
    sdk_install,
)
from tests.support.server import ServerProcess, serve
from tests.support.stores import STORE_KINDS, serve_arguments

pytestmark = [pytest.mark.bridge]

#: A small body limit, so a blob near it stays cheap on every backend.
BODY_LIMIT = 8 * 1024 * 1024
#: The bridge's JSON around a blob's base64: {"substore":"checkpoints","method":...}.
ENVELOPE_BYTES = 200
AGENT = "agent-blobs"
WORKSPACE = "/work/project"


def blob_near_the_limit() -> bytes:
    """The largest blob whose base64 leaves the bridge's envelope room under the limit."""
    raw = (BODY_LIMIT - ENVELOPE_BYTES) // 4 * 3
    return os.urandom(raw)


def blob_over_the_limit() -> bytes:
    return os.urandom(BODY_LIMIT // 4 * 3 + 3)


BLOB_SIZES = {"0 B": 0, "1 B": 1, "300 KB": 300 * 1000, "5 MiB": 5 * 1024 * 1024}


@pytest.fixture(scope="module")
def installed() -> SdkInstall:
    return current_install()


@pytest.fixture(params=STORE_KINDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    args = serve_arguments(request.param, request, tmp_path)
    with serve(*args, "--max-request-bytes", str(BODY_LIMIT)) as running:
        yield running


@pytest.fixture
def client(installed: SdkInstall, server: ServerProcess) -> Iterator[BridgeStoreClient]:
    with BridgeStoreClient(installed.bridge_dir, server.url, server.token, WORKSPACE) as bridge:
        yield bridge


def write(
    client: BridgeStoreClient, agent_id: str, blob_id: str, data: bytes, method: str = "create"
) -> None:
    """``checkpoints.create`` (or ``update``) through the bridge: it answers nothing."""
    input = {"agentId": agent_id, "blobId": blob_id, "data": blob(data)}
    assert client.store("checkpoints", method, input) is None


def read(client: BridgeStoreClient, agent_id: str, blob_id: str) -> bytes | None:
    """``checkpoints.get`` through the bridge: the bytes, or None for a miss."""
    found = client.store("checkpoints", "get", {"agentId": agent_id, "blobId": blob_id})
    return None if found is None else unblob(found)


def stored_blob(server: ServerProcess, agent_id: str, blob_id: str) -> bytes | None:
    """The blob as the store holds it, asked directly."""
    found = server.call("checkpoints", "get", {"agentId": agent_id, "blobId": blob_id})
    if not found["found"]:
        return None
    return base64.b64decode(found["data"])


def test_blobs_and_a_finished_run_through_the_bridge_client(
    client: BridgeStoreClient, server: ServerProcess
) -> None:
    blobs = {name: os.urandom(size) for name, size in BLOB_SIZES.items()}
    blobs["near the limit"] = blob_near_the_limit()
    for name, data in blobs.items():
        blob_id = f"blob {name}"
        write(client, AGENT, blob_id, data)
        # Byte-exact both ways: as the store holds it, and as the bridge reads it.
        assert stored_blob(server, AGENT, blob_id) == data, name
        assert read(client, AGENT, blob_id) == data, name

    # Over the limit: the store refuses it, the bridge throws, nothing is stored.
    with pytest.raises(BridgeCallError) as refused:
        write(client, AGENT, "too big", blob_over_the_limit())
    assert (refused.value.name, refused.value.code) == ("ConnectError", "resource_exhausted")
    assert stored_blob(server, AGENT, "too big") is None

    # A miss is null to the bridge (the store said found: false).
    assert read(client, AGENT, "absent") is None
    assert read(client, "other", "blob 1 B") is None

    # A duplicate create is already_exists and leaves the first bytes.
    with pytest.raises(BridgeCallError) as duplicate:
        write(client, AGENT, "blob 1 B", b"x")
    assert duplicate.value.code == "already_exists"
    assert stored_blob(server, AGENT, "blob 1 B") == blobs["1 B"]

    # An update replaces the bytes (here with bigger ones); a missing blob is not_found.
    replacement = os.urandom(70_000)
    write(client, AGENT, "blob 1 B", replacement, method="update")
    assert stored_blob(server, AGENT, "blob 1 B") == replacement
    assert read(client, AGENT, "blob 1 B") == replacement
    with pytest.raises(BridgeCallError) as missing:
        write(client, AGENT, "absent", b"y", method="update")
    assert missing.value.code == "not_found"

    # List: blob ids ascending, paged with the store's cursors.
    for blob_id in ("other c", "other a", "other b"):
        write(client, "other", blob_id, b"")
    expected = sorted(f"blob {name}" for name in blobs)
    listed: list[str] = []
    page: dict[str, Any] = client.store(
        "checkpoints", "list", {"filter": {"agentIds": [AGENT], "limit": 2}}
    )
    listed += page["items"]
    while page.get("nextCursor"):
        page = client.store(
            "checkpoints",
            "list",
            {"filter": {"agentIds": [AGENT], "limit": 2, "cursor": page["nextCursor"]}},
        )
        listed += page["items"]
    assert listed == expected
    everything = client.store("checkpoints", "list", {"filter": {"limit": 100}})
    assert everything["items"] == sorted([*expected, "other a", "other b", "other c"])

    # Delete by blob id, then every blob of an agent; the other agent's stay.
    only_one = {"blobIds": ["blob 0 B"], "agentIds": [AGENT]}
    assert client.store("checkpoints", "delete", {"filter": only_one}) is None
    assert stored_blob(server, AGENT, "blob 0 B") is None
    client.store("checkpoints", "delete", {"filter": {"agentIds": [AGENT]}})
    assert client.store("checkpoints", "list", {"filter": {"agentIds": [AGENT]}})["items"] == []
    assert stored_blob(server, AGENT, "blob 5 MiB") is None
    assert client.store("checkpoints", "list", {})["items"] == ["other a", "other b", "other c"]

    # On the same server and bridge client (one start of each per store kind).
    a_finished_run_through_the_sdk_bookkeeping(client, server)


def finish_a_run(client: BridgeStoreClient, checkpoint: bytes) -> dict[str, Any]:
    """What the SDK writes through the store for a run a model finished; returns ids."""
    created = client.platform("store", "createAgent", {"workspaceRef": WORKSPACE, "name": "run"})
    agent_id, run_id = created["agent"]["agentId"], created["run"]["runId"]
    client.platform("store", "markRunStarting", agent_id, run_id)
    # The conversation state: persisted as a content-addressed blob, named by the agent.
    ref = client.platform("checkpointStore", "saveCheckpoint", agent_id, message(checkpoint))
    client.platform("store", "patchCheckpoint", agent_id, run_id, ref)
    usage = {
        "inputTokens": 1200,
        "outputTokens": 345,
        # Beyond 2^32: integers must come back integers, whatever the backend.
        "cacheReadTokens": 2**40,
        "cacheWriteTokens": 0,
        "totalTokens": 2**40 + 1545,
        "reasoningTokens": 17,
    }
    client.platform(
        "store",
        "markRunTerminal",
        agent_id,
        run_id,
        {"status": "FINISHED", "result": "All tests pass.", "usage": usage},
    )
    return {"agentId": agent_id, "runId": run_id, "blobId": ref["blobId"], "usage": usage}


def a_finished_run_through_the_sdk_bookkeeping(
    client: BridgeStoreClient, server: ServerProcess
) -> None:
    checkpoint = os.urandom(300 * 1000)
    done = finish_a_run(client, checkpoint)
    assert_finished_run_stored(server, done, checkpoint)
    # And the SDK reads it back the same through the store.
    run = client.platform("store", "getRun", done["agentId"], done["runId"])
    assert (run["status"], run["result"], run["usage"]) == (
        "FINISHED",
        "All tests pass.",
        done["usage"],
    )
    assert run["latestCheckpointRef"]["blobId"] == done["blobId"]


def assert_finished_run_stored(
    server: ServerProcess, done: dict[str, Any], checkpoint: bytes
) -> None:
    run = server.call("runs", "get", {"agentId": done["agentId"], "runId": done["runId"]})
    assert run["status"] == "finished"
    assert run["result"] == "All tests pass."
    assert run["usage"] == done["usage"]
    assert isinstance(run["usage"]["cacheReadTokens"], int)
    assert run["endedAt"] >= run["startedAt"] >= run["createdAt"]
    assert run["latestCheckpointRef"] == {"schemaVersion": 1, "rootBlobId": done["blobId"]}
    agent = server.call("agents", "get", {"agentId": done["agentId"]})
    assert agent["status"] == "idle"
    assert agent["activeRunId"] is None
    assert agent["latestCheckpoint"] == {"schemaVersion": 1, "rootBlobId": done["blobId"]}
    # The blob is content-addressed: its id is the SHA-256 of the bytes.
    assert done["blobId"] == hashlib.sha256(checkpoint).hexdigest()
    assert stored_blob(server, done["agentId"], done["blobId"]) == checkpoint


@pytest.mark.slow
@pytest.mark.parametrize("version", TESTED_VERSIONS)
def test_each_tested_bridge_version_writes_blobs_and_finished_runs(
    version: str, tmp_path: Path
) -> None:
    install = sdk_install(version)
    checkpoint = os.urandom(5 * 1024 * 1024)
    with (
        serve("--store", f"sqlite:///{tmp_path / 'store.db'}") as server,
        BridgeStoreClient(install.bridge_dir, server.url, server.token, WORKSPACE) as client,
    ):
        write(client, AGENT, "b", b"")
        assert read(client, AGENT, "b") == b""
        assert read(client, AGENT, "no") is None
        done = finish_a_run(client, checkpoint)
        assert_finished_run_stored(server, done, checkpoint)
