"""Conformance of the checkpoints substore. See the package docstring for how to opt in."""

from __future__ import annotations

import base64
import os
from typing import ClassVar

from bridge_store.backend.substores import SubstoreName
from bridge_store.errors import Code
from bridge_store.wire.fields import MAX_CURSOR_LENGTH

from .harness import StoreClient, list_all, longest_key
from .tenants import CheckpointTenantConformance


class CheckpointConformance(CheckpointTenantConformance):
    """The checkpoints substore's contract; mix into a class that defines ``store_url``."""

    substore: ClassVar[SubstoreName | None] = "checkpoints"

    async def test_checkpoint_get_create_update(self, client: StoreClient) -> None:
        key = {"agentId": "a", "blobId": "b"}
        assert await client.call("checkpoints", "get", key) == {"found": False}
        data = base64.b64encode(b"\x00\x01binary\xff").decode()
        assert await client.call("checkpoints", "create", {**key, "data": data}) is None
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": data}
        await client.expect(Code.ALREADY_EXISTS, "checkpoints", "create", {**key, "data": ""})
        newer = base64.b64encode(b"newer").decode()
        assert await client.call("checkpoints", "update", {**key, "data": newer}) is None
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": newer}
        await client.expect(
            Code.NOT_FOUND, "checkpoints", "update", {"agentId": "a", "blobId": "c", "data": ""}
        )
        assert await client.call("checkpoints", "get", {"agentId": "a", "blobId": "c"}) == {
            "found": False
        }
        # Blobs belong to an agent: the same blob id of another agent is another blob.
        assert await client.call("checkpoints", "get", {"agentId": "z", "blobId": "b"}) == {
            "found": False
        }

    async def test_empty_checkpoint_blob_round_trips(self, client: StoreClient) -> None:
        key = {"agentId": "a", "blobId": "empty"}
        await client.call("checkpoints", "create", {**key, "data": ""})
        assert await client.call("checkpoints", "get", key) == {"found": True, "data": ""}

    async def test_32_mib_checkpoint_blob_round_trips(self, client: StoreClient) -> None:
        blob = os.urandom(32 * 1024 * 1024)
        data = base64.b64encode(blob).decode()
        key = {"agentId": "a", "blobId": "big"}
        await client.call("checkpoints", "create", {**key, "data": data})
        stored = await client.call("checkpoints", "get", key)
        assert stored["found"] is True
        assert base64.b64decode(stored["data"]) == blob

    async def test_checkpoint_list_order_filters_and_pages(self, client: StoreClient) -> None:
        for agent_id in ("a1", "a2"):
            for blob_id in ("b3", "b1", "b2"):
                await client.call(
                    "checkpoints", "create", {"agentId": agent_id, "blobId": blob_id, "data": ""}
                )
        everything = await list_all(client, "checkpoints", {"limit": 4})
        assert everything == ["b1", "b1", "b2", "b2", "b3", "b3"]
        assert await list_all(client, "checkpoints", {"agentIds": ["a2"], "limit": 1}) == [
            "b1",
            "b2",
            "b3",
        ]
        picked = await list_all(
            client, "checkpoints", {"agentIds": ["a1"], "blobIds": ["b3", "b9"]}
        )
        assert picked == ["b3"]
        page = await client.call("checkpoints", "list", {})
        assert page == {"items": everything}

    async def test_checkpoint_delete_filters(self, client: StoreClient) -> None:
        for agent_id in ("a1", "a2"):
            for blob_id in ("b1", "b2"):
                await client.call(
                    "checkpoints",
                    "create",
                    {"agentId": agent_id, "blobId": blob_id, "data": "AA=="},
                )
        await client.call(
            "checkpoints", "delete", {"filter": {"agentIds": ["a1"], "blobIds": ["b1"]}}
        )
        assert await list_all(client, "checkpoints", {"agentIds": ["a1"]}) == ["b2"]
        await client.call("checkpoints", "delete", {"filter": {"blobIds": ["b2"]}})
        assert await list_all(client, "checkpoints", {}) == ["b1"]
        await client.call("checkpoints", "delete", {"filter": {}})
        assert await list_all(client, "checkpoints", {}) == []

    async def test_checkpoint_longest_ids_are_stored_and_paged(self, client: StoreClient) -> None:
        blob_id, agents = longest_key(0), [longest_key(1), longest_key(2)]
        for agent_id in agents:
            data = {"agentId": agent_id, "blobId": blob_id, "data": "AAEC"}
            await client.call("checkpoints", "create", data)
            found = await client.call(
                "checkpoints", "get", {"agentId": agent_id, "blobId": blob_id}
            )
            assert found == {"found": True, "data": "AAEC"}
        page = await client.call("checkpoints", "list", {"filter": {"limit": 1}})
        assert len(page["nextCursor"]) <= MAX_CURSOR_LENGTH
        assert await list_all(client, "checkpoints", {"limit": 1}) == [blob_id, blob_id]
