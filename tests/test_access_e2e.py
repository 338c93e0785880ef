"""Access control and encryption at rest with the real bridge.

Tenants: two bridges with tokens of two tenants on one server each see only their own
agents, and a bridge with a ``read`` token of one tenant lists its agents but cannot
create one. Encryption: after a real bridge's agent life cycle on every durable
backend, the raw backend (the SQLite file, Postgres rows, Redis keys, S3 objects) holds
neither a ``blobEncryptionKey`` nor any checkpoint blob's bytes in plain form.
"""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import cursor_sdk
import cursor_sdk.errors
import pytest

from bridge_store.client import BridgeProcess, launch_bridge, local_options
from bridge_store.security.auth import Scope
from bridge_store.security.encryption import new_key_line
from bridge_store.security.tokens_file import add_token
from bridge_store_redis.keys import KeySpace
from bridge_store_s3.settings import parse_url
from testkit.cursor_api import MODEL_ID, CursorApiStub
from testkit.services import REDIS_URL, fetch
from tests.support.bridge_js import BridgeStoreClient, blob, unblob
from tests.support.sdk_versions import current_install
from tests.support.server import ServerProcess, serve
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments

pytestmark = [
    pytest.mark.bridge,
    pytest.mark.slow,
    pytest.mark.usefixtures("the_installed_bridge"),
]

API_KEY = "access-e2e-api-key"
PLANTED_KEY = "planted-blobEncryptionKey-7c1e94d2a0b3"


@pytest.fixture
def bridge_env(tmp_path: Path, cursor_api: CursorApiStub) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}


def bridge(
    server: ServerProcess,
    token: str,
    tmp_path: Path,
    name: str,
    env: dict[str, str],
    workspace: str | None = None,
) -> BridgeProcess:
    """A bridge on ``server`` with ``token``; agents are listed per workspace."""
    directory = tmp_path / (workspace or name)
    directory.mkdir(exist_ok=True)
    return launch_bridge(
        server.url, token, workspace=directory, state_root=tmp_path / f"state-{name}", env=env
    )


def options(tmp_path: Path, name: str) -> dict[str, Any]:
    return {"model": MODEL_ID, "api_key": API_KEY, "local": local_options(tmp_path / name)}


def listed(client: cursor_sdk.Client) -> set[str]:
    return {agent.agent_id for agent in client.agents.list().auto_paging_iter()}


# -- tenants --------------------------------------------------------------------------


def test_bridges_of_two_tenants_and_a_read_token_on_one_server(
    tmp_path: Path, bridge_env: dict[str, str]
) -> None:
    tokens = tmp_path / "tokens.toml"
    alice = add_token(tokens, "alice", tenant="team-a", scope=Scope.WRITE)
    bob = add_token(tokens, "bob", tenant="team-b", scope=Scope.WRITE)
    viewer = add_token(tokens, "team-a-viewer", tenant="team-a", scope=Scope.READ)
    store = ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    with (
        serve(*store, tokens_file=tokens, token=alice) as server,
        bridge(server, alice, tmp_path, "a", bridge_env) as bridge_a,
        # Every bridge works in the same checkout: only the tenant keeps them apart.
        bridge(server, bob, tmp_path, "b", bridge_env, workspace="a") as bridge_b,
        bridge(server, viewer, tmp_path, "v", bridge_env, workspace="a") as bridge_v,
        bridge_a.client() as client_a,
        bridge_b.client() as client_b,
        bridge_v.client() as client_v,
    ):
        made_by_a = client_a.agents.create(options(tmp_path, "a"), name="A's").agent_id
        made_by_b = client_b.agents.create(options(tmp_path, "a"), name="B's").agent_id
        assert listed(client_a) == {made_by_a}
        assert listed(client_b) == {made_by_b}
        with pytest.raises(cursor_sdk.errors.CursorAgentError):
            client_b.agents.get(made_by_a)
        # The read token lists tenant A's agents, and cannot create one: the bridge
        # reports the store's refusal.
        assert listed(client_v) == {made_by_a}
        with pytest.raises(cursor_sdk.errors.CursorAgentError) as refused:
            client_v.agents.create(options(tmp_path, "a"), name="not allowed")
        assert "permission" in str(refused.value).lower() or "scope" in str(refused.value)
        assert listed(client_a) == {made_by_a}
        # The store holds both agents, each in its own tenant.
        assert [a["agentId"] for a in server.call("agents", "list", {})["items"]] == [made_by_a]


# -- encryption at rest ---------------------------------------------------------------


def stored_values(kind: str, store_args: list[str], request: pytest.FixtureRequest) -> list[bytes]:
    """Every value the raw backend holds, read past bridge-store."""
    url = store_args[store_args.index("--store") + 1]
    values: list[bytes] = []
    if kind == "sqlite":
        path = Path(urlsplit(url).path)
        with sqlite3.connect(path) as db:
            for table in ("agents", "runs", "run_events", "checkpoint_blobs"):
                for row in db.execute(f"SELECT * FROM {table}"):  # noqa: S608 - fixed names
                    values += [v if isinstance(v, bytes) else str(v).encode() for v in row]
        for file in path.parent.glob(path.name + "*"):  # the file, its WAL
            values.append(file.read_bytes())
    if kind in ("postgres", "postgres+s3"):
        for table in ("agents", "runs", "run_events"):
            values += [row["doc"].encode() for row in fetch(url, f"SELECT doc FROM {table}")]  # noqa: S608
        if kind == "postgres":
            values += [
                bytes(row["data"]) for row in fetch(url, "SELECT data FROM checkpoint_blobs")
            ]
    if kind == "redis":
        import redis

        prefix = parse_qs(urlsplit(url).query)["prefix"][0]
        client = redis.Redis.from_url(REDIS_URL)
        try:
            for pattern in KeySpace(prefix).patterns():
                for key in client.scan_iter(match=pattern, count=1000):
                    kind_of = client.type(key)
                    if kind_of == b"string":
                        values.append(cast("bytes", client.get(key)))
                    elif kind_of == b"hash":
                        values += cast("dict[bytes, bytes]", client.hgetall(key)).values()
                    elif kind_of == b"zset":
                        values += cast("list[bytes]", client.zrange(key, 0, -1))
        finally:
            client.close()
    s3_url = (
        url
        if kind == "s3"
        else (
            store_args[store_args.index("--checkpoints") + 1]
            if "--checkpoints" in store_args
            else None
        )
    )
    if s3_url is not None:
        server = request.getfixturevalue("s3_server")
        settings = parse_url(s3_url)
        s3 = server.client()
        for key in server.keys(settings.prefix):
            values.append(s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read())
    assert values, f"read nothing from the {kind} store"
    return values


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_a_real_bridge_life_cycle_leaves_no_secret_in_the_backend(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, bridge_env: dict[str, str]
) -> None:
    keys = tmp_path / "store.keys"
    keys.write_text(new_key_line() + "\n")
    store_args = serve_arguments(kind, request, tmp_path)
    blobs = {"root": os.urandom(64 * 1024), "small": os.urandom(100)}
    with serve(*store_args, "--encryption-key-file", str(keys)) as server:
        with bridge(server, server.token, tmp_path, "w", bridge_env) as running:
            with running.client() as client:
                agent = client.agents.create(options(tmp_path, "w"), name="secretive")
                assert agent.send("hello").wait().status == "error"
                client.agents.archive(agent.agent_id)
                client.agents.unarchive(agent.agent_id)
            stored = server.call("agents", "get", {"agentId": agent.agent_id})
            bridge_key = stored["sdkMetadata"]["blobEncryptionKey"]
            assert bridge_key
            planted = {
                **stored,
                "agentId": "planted",
                "sdkMetadata": {"blobEncryptionKey": PLANTED_KEY},
            }
            server.call("agents", "create", {"agent": planted})
            workspace = str(tmp_path / "w")
            with BridgeStoreClient(
                current_install().bridge_dir, server.url, server.token, workspace
            ) as js:
                for blob_id, data in blobs.items():
                    js.store(
                        "checkpoints",
                        "create",
                        {"agentId": agent.agent_id, "blobId": blob_id, "data": blob(data)},
                    )
                # Through the server (and the bridge's own client) they read back plain.
                got = js.store("checkpoints", "get", {"agentId": agent.agent_id, "blobId": "root"})
                assert unblob(got) == blobs["root"]
        assert server.call("agents", "get", {"agentId": "planted"})["sdkMetadata"] == {
            "blobEncryptionKey": PLANTED_KEY
        }
    values = stored_values(kind, store_args, request)
    secrets_ = [PLANTED_KEY.encode(), bridge_key.encode()]
    for data in blobs.values():
        secrets_ += [data, data[:32], base64.b64encode(data)[:44]]
    for value in values:
        for secret in secrets_:
            assert secret not in value, f"plaintext found in the {kind} store"
    # The agents are there, with their names in the clear: only secrets are sealed.
    assert any(b"secretive" in value for value in values)
