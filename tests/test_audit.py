"""The audit log: one line per destructive call, with who and which ids, no content."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, agent, run
from bridge_store.security.audit import MAX_IDS_SHOWN
from bridge_store.security.auth import Scope
from bridge_store.stack.stores import Routes, open_stores

SECRET = "planted-secret-in-sdk-metadata"


@pytest.fixture
async def client() -> AsyncIterator[StoreClient]:
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single("memory://"), migrate=True)
    try:
        yield StoreClient(stores=opened.stores, manager=manager).as_tenant("team-a", Scope.WRITE)
    finally:
        await opened.close()


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    lines = [r.getMessage() for r in caplog.records if r.name == "bridge_store.audit"]
    assert all(line.startswith("audit ") for line in lines)
    return [json.loads(line.removeprefix("audit ")) for line in lines]


async def test_each_delete_writes_one_line_with_token_tenant_and_ids(
    client: StoreClient, caplog: pytest.LogCaptureFixture
) -> None:
    doc = agent("agent-1", sdkMetadata={"blobEncryptionKey": SECRET})
    await client.call("agents", "create", {"agent": doc})
    await client.call("runs", "create", {"run": run("run-1")})
    with caplog.at_level(logging.INFO, logger="bridge_store.audit"):
        await client.call("agents", "get", {"agentId": "agent-1"})
        await client.call("runs", "update", {"run": run("run-1", status="finished")})
        await client.call("agents", "delete", {"filter": {"agentIds": ["agent-1"], "cwd": "/w"}})
        await client.call("runs", "delete", {"filter": {}})
        await client.call("runEvents", "delete", {"filter": {"runIds": ["run-1"]}})
        await client.call("checkpoints", "delete", {"filter": {"blobIds": ["b1"]}})
    assert audit_lines(caplog) == [
        {
            "token": "conformance-team-a",
            "tenant": "team-a",
            "substore": "agents",
            "method": "delete",
            "filter": {"agentIds": ["agent-1"], "cwd": "/w"},
        },
        {
            "token": "conformance-team-a",
            "tenant": "team-a",
            "substore": "runs",
            "method": "delete",
            "filter": {},
        },
        {
            "token": "conformance-team-a",
            "tenant": "team-a",
            "substore": "runEvents",
            "method": "delete",
            "filter": {"runIds": ["run-1"]},
        },
        {
            "token": "conformance-team-a",
            "tenant": "team-a",
            "substore": "checkpoints",
            "method": "delete",
            "filter": {"blobIds": ["b1"]},
        },
    ]
    assert SECRET not in caplog.text


async def test_archiving_an_agent_is_audited_other_updates_are_not(
    client: StoreClient, caplog: pytest.LogCaptureFixture
) -> None:
    doc = agent("agent-1", name="private title", sdkMetadata={"blobEncryptionKey": SECRET})
    await client.call("agents", "create", {"agent": doc})
    with caplog.at_level(logging.INFO, logger="bridge_store.audit"):
        await client.call("agents", "update", {"agent": {**doc, "status": "running"}})
        await client.call("agents", "update", {"agent": {**doc, "status": "archived"}})
    [line] = audit_lines(caplog)
    assert line["method"] == "update"
    assert line["filter"] == {"agentId": "agent-1"}
    assert SECRET not in caplog.text
    assert "private title" not in caplog.text


async def test_refused_calls_are_not_audited_and_long_id_lists_are_cut(
    client: StoreClient, caplog: pytest.LogCaptureFixture
) -> None:
    reader = client.as_tenant("team-a", Scope.READ)
    many = [f"agent-{n}" for n in range(MAX_IDS_SHOWN + 7)]
    with caplog.at_level(logging.INFO, logger="bridge_store.audit"):
        await reader.error("agents", "delete", {"filter": {}})
        await client.call("agents", "delete", {"filter": {"agentIds": many}})
    [line] = audit_lines(caplog)
    ids = line["filter"]["agentIds"]  # type: ignore[index]
    assert ids[-1] == "(+7 more)"
    assert len(ids) == MAX_IDS_SHOWN + 1
