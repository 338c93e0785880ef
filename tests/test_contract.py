"""The contract layer, once: validation through dispatch, and blobs to and from base64.

Every input a client can get wrong is refused before any backend sees it, with
``invalid_argument`` naming the field, so these tests run once, on the in-memory
reference backend, rather than once per backend in the conformance suite.
"""

from __future__ import annotations

import base64
import random
from collections.abc import AsyncIterator

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, agent, list_all, longest_key, run
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc import contract
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.wire import fields
from tests.support.hostile import HOSTILE_CURSORS


@pytest.fixture
async def client() -> AsyncIterator[StoreClient]:
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single("memory://"), migrate=True)
    try:
        yield StoreClient(stores=opened.stores, manager=manager)
    finally:
        await opened.close()


# -- validation ------------------------------------------------------------------------


async def test_unknown_substore_and_method_are_unimplemented(client: StoreClient) -> None:
    await client.expect(Code.UNIMPLEMENTED, "widgets", "get", {})
    await client.expect(Code.UNIMPLEMENTED, "agents", "append", {})
    await client.expect(Code.UNIMPLEMENTED, "runEvents", "get", {})


async def test_agent_invalid_input_names_the_field(client: StoreClient) -> None:
    cases = [
        ("get", {}, "input.agentId"),
        ("get", {"agentId": ""}, "input.agentId"),
        ("get", {"agentId": 7}, "input.agentId"),
        ("create", {}, "input.agent"),
        ("create", {"agent": agent("")}, "input.agent.agentId"),
        ("create", {"agent": {**agent("a"), "updatedAt": "soon"}}, "input.agent.updatedAt"),
        ("create", {"agent": {**agent("a"), "updatedAt": 1.5}}, "input.agent.updatedAt"),
        ("create", {"agent": {**agent("a"), "cwd": None}}, "input.agent.cwd"),
        ("create", {"agent": {**agent("a"), "sdkMetadata": "x"}}, "input.agent.sdkMetadata"),
        ("update", {"agent": []}, "input.agent"),
        ("delete", {}, "input.filter"),
        ("delete", {"filter": {"agentIds": "a"}}, "input.filter.agentIds"),
        ("delete", {"filter": {"agentIds": ["a", 3]}}, "input.filter.agentIds[1]"),
        ("list", {"filter": {"limit": 0}}, "input.filter.limit"),
        ("list", {"filter": {"limit": -3}}, "input.filter.limit"),
        ("list", {"filter": {"limit": "10"}}, "input.filter.limit"),
        ("list", {"filter": {"cursor": "not-a-cursor"}}, "input.filter.cursor"),
        ("list", {"filter": {"cwd": 5}}, "input.filter.cwd"),
        ("list", {"filter": []}, "input.filter"),
    ]
    for method, data, field in cases:
        message = await client.expect(Code.INVALID_ARGUMENT, "agents", method, data)
        assert field in message, (method, data, message)
    assert await client.call("agents", "list", {}) == {"items": []}


async def test_keys_no_backend_can_index_are_invalid(client: StoreClient) -> None:
    for bad in ("nul\x00inside", "half \ud83d"):
        cases = [
            ("agents", "create", {"agent": agent(bad)}, "input.agent.agentId"),
            ("agents", "create", {"agent": agent("a", cwd=bad)}, "input.agent.cwd"),
            ("agents", "list", {"filter": {"cwd": bad}}, "input.filter.cwd"),
            ("agents", "delete", {"filter": {"agentIds": [bad]}}, "input.filter.agentIds[0]"),
            ("runs", "create", {"run": run(bad)}, "input.run.runId"),
            ("runs", "get", {"agentId": bad, "runId": "r"}, "input.agentId"),
            ("runEvents", "append", {"runId": bad, "eventType": "t"}, "input.runId"),
            (
                "runEvents",
                "append",
                {"runId": "r", "eventType": "t", "idempotencyKey": bad},
                "input.idempotencyKey",
            ),
            ("checkpoints", "get", {"agentId": "a", "blobId": bad}, "input.blobId"),
        ]
        for substore, method, data, field in cases:
            message = await client.expect(Code.INVALID_ARGUMENT, substore, method, data)
            assert field in message, (substore, method, message)


async def test_keys_one_byte_over_their_limit_are_invalid(client: StoreClient) -> None:
    # One limit for every backend (docs/limits.md); the conformance suite stores keys
    # at the limit on each.
    key = longest_key(0) + "x"
    cwd = longest_key(1, fields.MAX_CWD_BYTES) + "x"
    cases = [
        ("agents", "create", {"agent": agent(key)}, "input.agent.agentId"),
        ("agents", "get", {"agentId": key}, "input.agentId"),
        ("agents", "delete", {"filter": {"agentIds": ["a", key]}}, "input.filter.agentIds[1]"),
        ("runs", "create", {"run": run(key)}, "input.run.runId"),
        ("runs", "create", {"run": run("r", key)}, "input.run.agentId"),
        ("runs", "list", {"filter": {"runIds": [key]}}, "input.filter.runIds[0]"),
        ("runEvents", "append", {"runId": key, "eventType": "t"}, "input.runId"),
        ("runEvents", "append", {"runId": "r", "eventType": key}, "input.eventType"),
        (
            "runEvents",
            "append",
            {"runId": "r", "eventType": "t", "idempotencyKey": key},
            "input.idempotencyKey",
        ),
        ("checkpoints", "get", {"agentId": "a", "blobId": key}, "input.blobId"),
    ]
    for substore, method, data, field in cases:
        message = await client.expect(Code.INVALID_ARGUMENT, substore, method, data)
        limit = fields.MAX_KEY_BYTES
        assert message == f"{field} must be at most {limit} bytes of UTF-8, not {limit + 1}"
    for substore, method, data in (
        ("agents", "create", {"agent": agent("a", cwd=cwd)}),
        ("agents", "list", {"filter": {"cwd": cwd}}),
    ):
        message = await client.expect(Code.INVALID_ARGUMENT, substore, method, data)
        assert f"cwd must be at most {fields.MAX_CWD_BYTES} bytes of UTF-8" in message
    # payloadRef is a reference the stores never index: no limit.
    event = {"runId": "r", "eventType": "t", "payloadRef": "p" * 5000}
    assert (await client.call("runEvents", "append", event))["payloadRef"] == "p" * 5000


async def test_hostile_cursors_are_invalid_and_the_store_still_answers(
    client: StoreClient,
) -> None:
    for index in range(3):
        await client.call("agents", "create", {"agent": agent(f"a{index}")})
    for substore, cursors in HOSTILE_CURSORS.items():
        for cursor in cursors:
            message = await client.expect(
                Code.INVALID_ARGUMENT, substore, "list", {"filter": {"cursor": cursor}}
            )
            assert message == "input.filter.cursor is not a cursor this store issued", (
                substore,
                cursor[:40],
                message,
            )
    assert len(await list_all(client, "agents", {"limit": 1})) == 3


async def test_cursor_of_one_substore_is_rejected_by_another(client: StoreClient) -> None:
    for index in range(3):
        await client.call("agents", "create", {"agent": agent(f"a{index}")})
    cursor = (await client.call("agents", "list", {"filter": {"limit": 1}}))["nextCursor"]
    await client.expect(Code.INVALID_ARGUMENT, "runs", "list", {"filter": {"cursor": cursor}})


async def test_run_invalid_input_names_the_field(client: StoreClient) -> None:
    cases = [
        ("get", {"agentId": "a"}, "input.runId"),
        ("get", {"runId": "r"}, "input.agentId"),
        ("create", {"run": run("r", "")}, "input.run.agentId"),
        ("create", {"run": {**run("r"), "turnNumber": None}}, "input.run.turnNumber"),
        ("create", {"run": {**run("r"), "turnNumber": True}}, "input.run.turnNumber"),
        ("create", {"run": {**run("r"), "model": "composer"}}, "input.run.model"),
        ("update", {"run": "r"}, "input.run"),
        ("delete", {"filter": None}, "input.filter"),
        ("delete", {"filter": {"runIds": [""]}}, "input.filter.runIds[0]"),
        ("list", {"filter": {"agentIds": {}}}, "input.filter.agentIds"),
        ("list", {"filter": {"limit": 2.5}}, "input.filter.limit"),
    ]
    for method, data, field in cases:
        message = await client.expect(Code.INVALID_ARGUMENT, "runs", method, data)
        assert field in message, (method, data, message)
    assert await client.call("runs", "list", {}) == {"items": []}


async def test_event_invalid_input_names_the_field(client: StoreClient) -> None:
    cases = [
        ("append", {"eventType": "t"}, "input.runId"),
        ("append", {"runId": "r"}, "input.eventType"),
        (
            "append",
            {"runId": "r", "eventType": "t", "idempotencyKey": 5},
            "input.idempotencyKey",
        ),
        ("append", {"runId": "r", "eventType": "t", "payloadRef": []}, "input.payloadRef"),
        ("list", {}, "input.runId"),
        ("list", {"runId": "r", "afterOffset": "abc"}, "input.afterOffset"),
        ("list", {"runId": "r", "afterOffset": "-1"}, "input.afterOffset"),
        ("list", {"runId": "r", "limit": 0}, "input.limit"),
        ("delete", {"filter": {"runIds": "r"}}, "input.filter.runIds"),
    ]
    for method, data, field in cases:
        message = await client.expect(Code.INVALID_ARGUMENT, "runEvents", method, data)
        assert field in message, (method, data, message)
    assert await client.call("runEvents", "list", {"runId": "r"}) == {"items": []}


async def test_checkpoint_invalid_input_names_the_field(client: StoreClient) -> None:
    cases = [
        ("get", {"blobId": "b"}, "input.agentId"),
        ("get", {"agentId": "a"}, "input.blobId"),
        ("create", {"agentId": "a", "blobId": "b"}, "input.data"),
        ("create", {"agentId": "a", "blobId": "b", "data": "not base64!"}, "input.data"),
        ("create", {"agentId": "a", "blobId": "b", "data": 12}, "input.data"),
        ("update", {"agentId": "a", "blobId": "", "data": ""}, "input.blobId"),
        ("delete", {}, "input.filter"),
        ("list", {"filter": {"blobIds": [None]}}, "input.filter.blobIds[0]"),
        ("list", {"filter": {"cursor": 42}}, "input.filter.cursor"),
    ]
    for method, data, field in cases:
        message = await client.expect(Code.INVALID_ARGUMENT, "checkpoints", method, data)
        assert field in message, (method, data, message)
    assert await client.call("checkpoints", "list", {}) == {"items": []}


# -- blobs -----------------------------------------------------------------------------

PIECE = 3 * 1024 * 1024


@pytest.mark.parametrize("size", [0, 1, 2, 3, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 2])
def test_base64_pieces_join_into_the_base64_of_the_whole(size: int) -> None:
    data = random.Random(size).randbytes(size)
    assert "".join(contract.base64_pieces(data)) == base64.b64encode(data).decode("ascii")


def test_take_blob_decodes_and_removes_the_text() -> None:
    parent = {"agentId": "a", "data": base64.b64encode(b"\x00blob\xff").decode("ascii")}
    assert contract.take_blob(parent, "input") == b"\x00blob\xff"
    assert parent == {"agentId": "a"}


@pytest.mark.parametrize("text", ["YQ=", "YQ", "Y Q==", "YQ==YQ==", "=YQ=", "é", "YQ==\n", 7])
def test_take_blob_refuses_what_is_not_strict_base64(text: object) -> None:
    parent = {"data": text}
    with pytest.raises(ConnectError) as caught:
        contract.take_blob(parent, "input")
    assert caught.value.code.value == "invalid_argument"
    assert "input.data" in caught.value.message
    assert parent == {"data": text}  # left as it was
