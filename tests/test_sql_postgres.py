"""The SQL backend on Postgres: the conformance suite in a database of its own."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import BackendOptions
from bridge_store.conformance import ExportQueueConformance, LeaseConformance, StoreConformance
from bridge_store.conformance.harness import longest_key
from bridge_store.errors import BackendUnreachable, Code, ConfigurationError, ConnectError
from bridge_store.rpc.contract import new_event
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.postgres import PostgresDatabase
from bridge_store_sql.settings import PostgresSettings, parse_postgres
from testkit.round_trips import WriteCounter
from testkit.services import database_url, execute, fetch, free_port

from .support.postgres import emptied, terminate_connections
from .test_sql_sqlite import SqlBackendChecks

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def database(make_migrated_postgres_url: Callable[[], str]) -> str:
    """One migrated database for the module, emptied before each test that uses it:
    creating (and at the end dropping) a database per test would cost more than the
    tests themselves."""
    return make_migrated_postgres_url()


class TestPostgresBackend(StoreConformance):
    @pytest.fixture
    def store_url(self, database: str) -> str:
        return emptied(database)


class TestPostgresLeases(LeaseConformance):
    @pytest.fixture
    def store_url(self, database: str) -> str:
        return emptied(database)


class TestPostgresExportQueue(ExportQueueConformance):
    @pytest.fixture
    def store_url(self, database: str) -> str:
        return emptied(database)


class TestPostgresChecks(SqlBackendChecks):
    @pytest.fixture
    def sql_url(self, database: str) -> str:
        return emptied(database)

    @pytest.fixture
    def unmigrated_sql_url(self, make_postgres_url: Callable[[], str]) -> str:
        return make_postgres_url()


# -- Postgres specifics ----------------------------------------------------------------


@pytest.fixture
async def backend(database: str) -> AsyncIterator[SqlBackend]:
    opened = open_backend(get_plugin_manager(), emptied(database) + "?pool_size=2")
    assert isinstance(opened, SqlBackend)
    await opened.start(migrate=True)
    try:
        yield opened
    finally:
        await opened.close()


def dsn(backend: SqlBackend) -> str:
    assert isinstance(backend.db, PostgresDatabase)
    return backend.db.settings.dsn


async def test_append_is_one_round_trip(backend: SqlBackend) -> None:
    assert isinstance(backend.db, PostgresDatabase)
    counter = WriteCounter(backend.db)
    events = backend.run_events

    async def append(key: str | None) -> None:
        await events.append(
            "default", new_event({"runId": "r", "eventType": "t", "idempotencyKey": key}, "in")
        )

    async def read() -> None:
        await events.list("default", "r", after_seq=0, limit=10)
        await backend.agents.get("default", "nobody")

    # Warm up every pooled connection: a statement's first use on one prepares it.
    for index in range(4):
        await append(None)
        await append(f"warm-{index}")
        await read()
    before = counter.writes
    for _ in range(50):
        await append(None)
    assert counter.per_call(50, before) == 1
    before = counter.writes
    for index in range(50):
        await append(f"key-{index}")
    assert counter.per_call(50, before) == 1
    # A retried append (key already stored) is answered by the same one statement.
    before = counter.writes
    for index in range(50):
        await append(f"key-{index}")
    assert counter.per_call(50, before) == 1
    before = counter.writes
    for _ in range(20):
        await read()
    assert counter.per_call(40, before) == 1


async def test_large_blob_round_trips_as_bytes(backend: SqlBackend) -> None:
    blob = os.urandom(48 * 1024 * 1024)
    await backend.checkpoints.create("default", "a", "big", blob)
    stored = await backend.checkpoints.get("default", "a", "big")
    assert stored == blob
    assert isinstance(stored, bytes)
    (storage,) = fetch(
        dsn(backend),
        "SELECT attstorage::text FROM pg_attribute "
        "WHERE attrelid = 'checkpoint_blobs'::regclass AND attname = 'data'",
    )
    assert storage[0] == "e"  # EXTERNAL: out of line, no compression attempt


async def test_strings_postgres_cannot_store_are_invalid_argument(backend: SqlBackend) -> None:
    with pytest.raises(ConnectError) as caught:
        await backend.agents.get("default", "nul\x00inside")
    assert caught.value.code == Code.INVALID_ARGUMENT


async def test_an_index_entry_over_postgres_limit_is_invalid_argument(backend: SqlBackend) -> None:
    # The contract keeps clients' keys far below it; a caller that skips the contract
    # still gets a client error, not the database's SQLSTATE 54000 as internal.
    too_long = longest_key(0, 3000)
    with pytest.raises(ConnectError) as caught:
        await backend.agents.create("default", {"agentId": too_long, "cwd": "/w", "updatedAt": 1})
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert "index row size" in caught.value.message


async def test_documents_are_stored_as_given_json_text(backend: SqlBackend) -> None:
    doc = {"agentId": "a", "cwd": "/w", "updatedAt": 2**53, "zeta": 1, "alpha": [1.5, None]}
    await backend.agents.create("default", doc)
    ((text,),) = fetch(dsn(backend), "SELECT doc FROM agents")
    assert json.loads(text) == doc
    assert list(json.loads(text)) == list(doc)


async def test_idle_connections_closed_by_the_server_are_replaced(backend: SqlBackend) -> None:
    await asyncio.gather(*(backend.agents.get("default", "x") for _ in range(4)))
    killed = terminate_connections(dsn(backend))
    assert killed, "the pool held no connection to kill"
    # The sync call above blocked the event loop: give it a turn to read the EOFs.
    await asyncio.sleep(0.1)
    # A keyless append is never retried (it might run twice), so this passes only if
    # the dead pooled connections are replaced before anything is sent on them.
    for _ in range(4):
        await backend.run_events.append(
            "default", new_event({"runId": "r", "eventType": "t"}, "in")
        )
        assert await backend.agents.get("default", "x") is None


# -- URLs ------------------------------------------------------------------------------


def test_pool_parameters_are_taken_from_the_url_and_the_rest_passed_to_asyncpg() -> None:
    settings = parse_postgres(
        "postgresql+asyncpg://user:secret@db.example:6432/store?pool_size=20&max_overflow=0"
        "&pool_timeout=2.5&pool_recycle=-1&pool_pre_ping=true&connect_timeout=3"
        "&command_timeout=9&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"
        "&application_name=sidecar"
    )
    assert settings == PostgresSettings(
        dsn="postgresql://user:secret@db.example:6432/store?sslmode=verify-full"
        "&sslrootcert=%2Fetc%2Fca.pem&application_name=sidecar",
        pool_size=20,
        max_overflow=0,
        pool_timeout=2.5,
        pool_recycle=-1,
        pool_pre_ping=True,
        connect_timeout=3.0,
        command_timeout=9.0,
    )
    assert parse_postgres("postgres://h/db").dsn == "postgresql://h/db"


def test_the_server_backend_timeout_is_the_default_and_url_parameters_win() -> None:
    defaults = parse_postgres("postgresql://h/db", timeout=2.5)
    assert (defaults.pool_timeout, defaults.connect_timeout, defaults.command_timeout) == (
        2.5,
        2.5,
        2.5,
    )
    given = parse_postgres(
        "postgresql://h/db?pool_timeout=1&connect_timeout=3&command_timeout=9", timeout=2.5
    )
    assert (given.pool_timeout, given.connect_timeout, given.command_timeout) == (1.0, 3.0, 9.0)


async def test_every_connection_has_keepalives_within_the_backend_timeout(
    database: str,
) -> None:
    options = BackendOptions(timeout=2.0)
    backend = open_backend(get_plugin_manager(), database, options)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)

    def socket_options(connection: Any) -> dict[int, int]:
        raw = connection.driver  # the asyncpg connection
        sock = raw._transport.get_extra_info("socket")
        wanted = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE)]
        wanted += [(socket.IPPROTO_TCP, option) for option in options.tcp_keepalive()]
        return {option: sock.getsockopt(level, option) for level, option in wanted}

    try:
        found = await backend.db.read(socket_options, what="socket options")
    finally:
        await backend.close()
    assert found[socket.SO_KEEPALIVE] == 1
    assert {option: found[option] for option in options.tcp_keepalive()} == (
        options.tcp_keepalive()
    )
    assert found[socket.TCP_USER_TIMEOUT] == 2000  # unacknowledged data: dead after 2 s


@pytest.mark.parametrize(
    "query",
    ["pool_size=0", "pool_size=x", "pool_timeout=-1", "pool_pre_ping=maybe", "max_overflow=-2"],
)
def test_bad_pool_parameters_are_configuration_errors(query: str) -> None:
    with pytest.raises(ConfigurationError, match=query.split("=")[0]):
        open_backend(get_plugin_manager(), f"postgresql://h/db?{query}")


async def test_tls_parameters_reach_the_driver(database: str) -> None:
    # The test server runs without TLS: requiring it must fail, and say why.
    backend = open_backend(get_plugin_manager(), database + "?sslmode=require")
    with pytest.raises(ConfigurationError, match=r"(?i)ssl"):
        await backend.start(migrate=True)


async def test_a_schema_of_its_own_through_search_path(
    make_postgres_url: Callable[[], str],
) -> None:
    """Deployments sharing one database each keep their tables in their own schema."""
    url = make_postgres_url()
    execute(url, "CREATE SCHEMA team_a", "CREATE SCHEMA team_b")
    for schema in ("team_a", "team_b"):
        backend = open_backend(get_plugin_manager(), f"{url}?search_path={schema}")
        await backend.start(migrate=True)
        try:
            assert backend.run_events is not None
            event = await backend.run_events.append(
                "default", new_event({"runId": "r", "eventType": schema}, "in")
            )
            assert event["seq"] == 1
        finally:
            await backend.close()
    tables = fetch(
        url,
        "SELECT schemaname, tablename FROM pg_tables "
        "WHERE schemaname IN ('public', 'team_a', 'team_b') ORDER BY 1, 2",
    )
    # Each schema holds the whole schema and the public one holds nothing.
    in_schema = {
        schema: {row[1] for row in tables if row[0] == schema}
        for schema in ("public", "team_a", "team_b")
    }
    assert in_schema["public"] == set()
    assert in_schema["team_a"] == in_schema["team_b"]
    assert {"agents", "runs", "run_events", "checkpoint_blobs"} <= in_schema["team_a"]


async def test_missing_database_fails_the_start() -> None:
    url = database_url("bridge_store_test_no_such_database")
    backend = open_backend(get_plugin_manager(), url)
    with pytest.raises(ConfigurationError, match="does not exist"):
        await backend.start(migrate=True)


async def test_unreachable_server_fails_the_start_quickly() -> None:
    port = free_port()
    backend = open_backend(get_plugin_manager(), f"postgresql://postgres@127.0.0.1:{port}/db")
    with pytest.raises(BackendUnreachable, match=f"cannot reach postgresql://.*:{port}/db"):
        await asyncio.wait_for(backend.start(migrate=True), timeout=30)
