"""Encryption as a layer over any backend: transparent to clients, opaque in storage,
and re-encrypted by ``keys rotate``."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pluggy
import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.conformance import StoreConformance
from bridge_store.conformance.harness import StoreClient, agent
from bridge_store.errors import Code
from bridge_store.security.encryption import Identity, Keyring, key_id
from bridge_store.security.rotation import rotate
from bridge_store.security.sealed_stores import seal_stores
from bridge_store.stack.stores import Routes, Stores, open_stores

KEY_OLD, KEY_NEW = os.urandom(32), os.urandom(32)
SECRET = "planted-blob-encryption-key-5f3a9c"
BLOB = b"checkpoint bytes that must not be stored in the clear"


class TestSealedStoresConform(StoreConformance):
    """Every contract test passes with encryption on: clients never see a seal."""

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"

    @pytest.fixture
    async def client(
        self, store_url: str, plugin_manager: pluggy.PluginManager
    ) -> AsyncIterator[StoreClient]:
        opened = await open_stores(plugin_manager, self.routes(store_url), migrate=True)
        try:
            sealed = seal_stores(opened.stores, Keyring([KEY_NEW]))
            yield StoreClient(stores=sealed, manager=plugin_manager)
        finally:
            await opened.close()


@pytest.fixture
async def raw() -> AsyncIterator[Stores]:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        yield opened.stores
    finally:
        await opened.close()


def client_of(stores: Stores, *keys: bytes) -> StoreClient:
    return StoreClient(
        stores=seal_stores(stores, Keyring(list(keys))), manager=get_plugin_manager()
    )


async def write_items(client: StoreClient, agent_id: str) -> None:
    doc = agent(agent_id, sdkMetadata={"blobEncryptionKey": SECRET})
    await client.call("agents", "create", {"agent": doc})
    data = base64.b64encode(BLOB).decode()
    await client.call("checkpoints", "create", {"agentId": agent_id, "blobId": "b", "data": data})


async def read_items(client: StoreClient, agent_id: str) -> tuple[str, bytes]:
    doc = await client.call("agents", "get", {"agentId": agent_id})
    blob = await client.call("checkpoints", "get", {"agentId": agent_id, "blobId": "b"})
    return doc["sdkMetadata"]["blobEncryptionKey"], base64.b64decode(blob["data"])


async def test_backends_receive_sealed_secrets_only(raw: Stores) -> None:
    await write_items(client_of(raw, KEY_NEW), "agent-1")
    stored = await raw.agents.get(DEFAULT_TENANT, "agent-1")
    assert stored is not None
    assert SECRET not in repr(stored)
    assert stored["name"] == "agent agent-1"  # only sdkMetadata is sealed
    blob = await raw.checkpoints.get(DEFAULT_TENANT, "agent-1", "b")
    assert blob is not None
    assert BLOB not in blob
    listed = await client_of(raw, KEY_NEW).call("agents", "list", {})
    assert listed["items"][0]["sdkMetadata"] == {"blobEncryptionKey": SECRET}


async def test_a_server_without_the_key_answers_failed_precondition(raw: Stores) -> None:
    await write_items(client_of(raw, KEY_OLD), "agent-1")
    stranger = client_of(raw, KEY_NEW)
    message = await stranger.expect(
        Code.FAILED_PRECONDITION, "agents", "get", {"agentId": "agent-1"}
    )
    assert key_id(KEY_OLD).hex() in message
    await stranger.expect(
        Code.FAILED_PRECONDITION, "checkpoints", "get", {"agentId": "agent-1", "blobId": "b"}
    )
    await stranger.expect(Code.FAILED_PRECONDITION, "agents", "list", {})


async def test_rotate_re_encrypts_every_tenant_under_the_first_key_and_resumes(
    raw: Stores,
) -> None:
    # Items stored before encryption, under the old key, and in two tenants.
    plain = StoreClient(stores=raw, manager=get_plugin_manager())
    await write_items(plain, "plain")
    await write_items(client_of(raw, KEY_OLD), "old")
    await write_items(client_of(raw, KEY_OLD).as_tenant("team-b"), "old")
    both = Keyring([KEY_NEW, KEY_OLD])
    report = await rotate(raw, both)
    assert (report.agents_rewritten, report.blobs_rewritten) == (3, 3)
    again = await rotate(raw, both)
    assert (again.agents_rewritten, again.blobs_rewritten) == (0, 0)
    assert (again.agents_current, again.blobs_current) == (3, 3)
    # The old key is no longer needed for anything.
    new_only = client_of(raw, KEY_NEW)
    for client, agent_id in [
        (new_only, "plain"),
        (new_only, "old"),
        (new_only.as_tenant("team-b"), "old"),
    ]:
        assert await read_items(client, agent_id) == (SECRET, BLOB)
    stored = await raw.checkpoints.get(DEFAULT_TENANT, "plain", "b")
    assert stored is not None
    assert Keyring([KEY_NEW]).blob_is_current(stored)
    assert Keyring([KEY_NEW]).open_blob(stored, Identity(DEFAULT_TENANT, "plain", "b")) == BLOB


def test_keys_rotate_command_on_a_sqlite_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from bridge_store.cli import main

    url = f"sqlite:///{tmp_path}/store.db"
    keys = tmp_path / "keys"
    keys.write_text(KEY_OLD.hex() + "\n")

    async def write_then(check: bool) -> tuple[str, bytes] | None:
        opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
        try:
            if not check:
                await write_items(client_of(opened.stores, KEY_OLD), "agent-1")
                return None
            blob = await opened.stores.checkpoints.get(DEFAULT_TENANT, "agent-1", "b")
            assert blob is not None
            assert Keyring([KEY_NEW]).blob_is_current(blob)
            return await read_items(client_of(opened.stores, KEY_NEW), "agent-1")
        finally:
            await opened.close()

    asyncio.run(write_then(check=False))
    keys.write_text(KEY_NEW.hex() + "\n" + KEY_OLD.hex() + "\n")
    assert main(["keys", "rotate", "--store", url, "--encryption-key-file", str(keys)]) == 0
    out = capsys.readouterr().out
    assert f"under key {key_id(KEY_NEW).hex()}: 1 agent (0 already were), 1 blob" in out
    assert asyncio.run(write_then(check=True)) == (SECRET, BLOB)
