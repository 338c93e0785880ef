"""Every schema revision, both ways, with data in the database, on SQLite and Postgres.

Written over the list of revisions the package ships, so a new revision is covered
the day it lands: for each revision, a database at head holding data is taken down
to that revision and back up, then down past it and back up again, and everything
the store held (documents with unknown fields and large integers, event logs with
their counters, blobs) must read back the same through the contract layer. A
database at a revision this bridge-store has no script for (a newer one upgraded it)
is refused with one clear line by ``db upgrade`` and ``serve``, and left untouched.
"""

from __future__ import annotations

import base64
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance.harness import StoreClient, agent, list_all, run
from bridge_store.errors import ConfigurationError
from bridge_store.stack.stores import Routes, open_stores
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade, head_revision, revisions
from testkit.services import fetch

UNKNOWN_REVISION = "f00dfeed"
BLOB = bytes(range(256)) * 3 + b"\x00" * 100


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("make_postgres_url")()
    return url


@asynccontextmanager
async def contract(url: str) -> AsyncIterator[StoreClient]:
    """The store at ``url`` as the server drives it (upgrading it to head on open)."""
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        yield StoreClient(stores=opened.stores, manager=manager)
    finally:
        await opened.close()


async def write_history(client: StoreClient) -> None:
    """A little of everything a bridge stores, with the awkward values in it."""
    await client.call(
        "agents",
        "create",
        {"agent": agent("agent-1", updated_at=2**53, futureField={"kept": [1, 2.5, None]})},
    )
    await client.call("agents", "create", {"agent": agent("agent-2", cwd="/work/b")})
    for turn in (1, 2):
        await client.call("runs", "create", {"run": run(f"run-{turn}", turn_number=turn)})
    for index in range(3):
        await client.call(
            "runEvents",
            "append",
            {
                "runId": "run-1",
                "eventType": "sdk_message",
                "payload": {"index": index, "text": "héllo\u2028"},
                **({"idempotencyKey": "key-1"} if index == 1 else {}),
            },
        )
    data = base64.b64encode(BLOB).decode()
    await client.call(
        "checkpoints", "create", {"agentId": "agent-1", "blobId": "root", "data": data}
    )


async def read_history(client: StoreClient) -> dict[str, Any]:
    return {
        "agents": await list_all(client, "agents", {}),
        "runs": await list_all(client, "runs", {}),
        "events": await client.call("runEvents", "list", {"runId": "run-1"}),
        "blobs": await list_all(client, "checkpoints", {}),
        "blob": await client.call("checkpoints", "get", {"agentId": "agent-1", "blobId": "root"}),
    }


async def migrate_down(url: str, revision: str | None) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:
        await backend.db.migrate(lambda conn: downgrade(conn, revision), what="test downgrade")
        assert await backend.schema_revision() == revision
    finally:
        await backend.close()


def previous(revision: str) -> str | None:
    shipped = revisions()
    index = shipped.index(revision)
    return shipped[index - 1] if index else None


def test_the_revisions_form_one_line_ending_at_head() -> None:
    shipped = revisions()
    assert shipped
    assert shipped[-1] == head_revision()
    assert len(set(shipped)) == len(shipped)


@pytest.mark.parametrize("revision", revisions())
async def test_down_to_each_revision_and_past_it_and_up_again(
    database_url: str, revision: str
) -> None:
    async with contract(database_url) as client:
        await write_history(client)
        before = await read_history(client)

    # Down to this revision with the data in it (nothing to do for head), then up.
    await migrate_down(database_url, revision)
    async with contract(database_url) as client:
        assert await read_history(client) == before

    # Past it: the revision's own downgrade, then its upgrade on what that left.
    below = previous(revision)
    await migrate_down(database_url, below)
    async with contract(database_url) as client:
        if below is None:
            # Below the first revision there is no schema, so no data: a fresh store.
            assert await read_history(client) == {
                "agents": [],
                "runs": [],
                "events": {"items": []},
                "blobs": [],
                "blob": {"found": False},
            }
            return
        assert await read_history(client) == before
        # The event log goes on from where it was: its counter came through too.
        appended = await client.call("runEvents", "append", {"runId": "run-1", "eventType": "t"})
        assert appended["seq"] == 4


def set_revision(url: str, revision: str) -> None:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            connection.execute(
                "UPDATE bridge_store_alembic_version SET version_num = ?", [revision]
            )
    else:
        fetch(url, "UPDATE bridge_store_alembic_version SET version_num = $1", revision)


def stored_revision(url: str) -> str:
    query = "SELECT version_num FROM bridge_store_alembic_version"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            ((revision,),) = connection.execute(query).fetchall()
    else:
        ((revision,),) = fetch(url, query)
    return str(revision)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"BRIDGE_STORE_AUTH_TOKEN": "t" * 32, "PATH": ""},
        check=False,
    )


async def test_a_database_at_an_unknown_revision_is_refused_and_left_alone(
    database_url: str,
) -> None:
    async with contract(database_url) as client:
        await write_history(client)
        before = await read_history(client)
    set_revision(database_url, UNKNOWN_REVISION)
    refusal = f"revision '{UNKNOWN_REVISION}', which this bridge-store does not know"

    upgraded = cli("db", "upgrade", "--store", database_url)
    assert upgraded.returncode == 2, upgraded.stderr
    assert refusal in upgraded.stderr
    assert "newer bridge-store" in upgraded.stderr
    assert "Traceback" not in upgraded.stderr

    current = cli("db", "current", "--store", database_url)
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip().endswith(f": {UNKNOWN_REVISION}")

    served = cli("serve", "--port", "0", "--store", database_url)
    assert served.returncode == 2, served.stderr
    assert refusal in served.stderr
    # Refused before uvicorn starts: its lifespan printed the stack above the message.
    assert "Traceback" not in served.stderr
    assert len(served.stderr.strip().splitlines()) == 1, served.stderr

    assert stored_revision(database_url) == UNKNOWN_REVISION
    set_revision(database_url, head_revision())
    async with contract(database_url) as client:
        assert await read_history(client) == before


async def test_downgrade_refuses_an_unknown_revision_too(database_url: str) -> None:
    async with contract(database_url):
        pass
    set_revision(database_url, UNKNOWN_REVISION)
    with pytest.raises(ConfigurationError, match="does not know"):
        await migrate_down(database_url, None)
    assert stored_revision(database_url) == UNKNOWN_REVISION
