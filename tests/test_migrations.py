"""The alembic migrations: shipped as a package, run on SQLite and Postgres alike.

They bring an empty database to head, create exactly the schema ``tables.py``
describes, and several processes upgrading one empty database at once (servers
starting together) end with one good schema.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import os
import sqlite3
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance.harness import StoreClient
from bridge_store.stack.stores import Routes, open_stores
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.engine import MIGRATION_LOCK_KEY
from bridge_store_sql.migrate import MIGRATIONS_PACKAGE, head_revision, upgrade
from bridge_store_sql.tables import (
    POSTGRES_SEARCH_INDEXES,
    RUN_SORT_INDEXES,
    SQLITE_KEY_CONSTRAINT,
    SQLITE_SEARCH_TABLES,
    VERSION_TABLE,
    metadata,
)
from testkit.services import fetch

EXPECTED_TABLES = {
    "agents",
    "runs",
    "run_events",
    "run_event_counters",
    "checkpoint_blobs",
    "run_tool_calls",
    "run_tool_days",
    "run_export_queue",
    "run_days",
    "run_agent_days",
    VERSION_TABLE,
}
SEARCH_OBJECTS = SQLITE_SEARCH_TABLES | POSTGRES_SEARCH_INDEXES
#: Expression indexes, which alembic cannot reflect: compared by their definition below.
EXPRESSION_INDEXES = set(RUN_SORT_INDEXES)


def expected_tables(dialect: str) -> set[str]:
    return EXPECTED_TABLES | (SQLITE_SEARCH_TABLES if dialect == "sqlite" else set())


def sql_backend(url: str) -> SqlBackend:
    if url.startswith("sqlite:///"):
        # Started without migration, a SQLite store must exist: an empty file is one.
        Path(url.removeprefix("sqlite:///")).touch(mode=0o600)
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    return backend


def downgrade(connection: sa.Connection, revision: str) -> None:
    config = Config()
    with importlib.resources.as_file(importlib.resources.files(MIGRATIONS_PACKAGE)) as where:
        config.set_main_option("script_location", str(where))
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def schema_differences(connection: sa.Connection) -> list[Any]:
    sqlite = connection.dialect.name == "sqlite"

    def declared(name: str | None, kind: str, parents: Any) -> bool:
        # The search index is the database's own (tables.py says which objects);
        # SQLite keeps the key's uniqueness in a constraint, checked apart below.
        if sqlite and name == SQLITE_KEY_CONSTRAINT:
            return False
        return name not in SEARCH_OBJECTS and name not in EXPRESSION_INDEXES

    def compared(item: Any, name: str | None, kind: str, reflected: bool, other: Any) -> bool:
        return declared(name, kind, None)

    context = MigrationContext.configure(
        connection,
        opts={
            "version_table": VERSION_TABLE,
            "compare_type": True,
            "include_name": declared,
            "include_object": compared,
        },
    )
    with warnings.catch_warnings():
        # SQLAlchemy reflects no expression index (it says so); they are checked below.
        warnings.filterwarnings(
            "ignore", "Skipped unsupported reflection of expression-based index", sa.exc.SAWarning
        )
        warnings.filterwarnings(
            "ignore", "autogenerate skipping metadata-specified expression-based index"
        )
        differences: list[Any] = compare_metadata(context, metadata)
    differences += sort_index_differences(connection)
    if sqlite:
        constraints = sa.inspect(connection).get_unique_constraints("run_events")
        key = {
            "name": SQLITE_KEY_CONSTRAINT,
            "column_names": ["tenant", "run_id", "idempotency_key"],
        }
        if key not in constraints:
            differences.append(("unique constraint missing", key, constraints))
    return differences


def sort_index_differences(connection: sa.Connection) -> list[Any]:
    """Each run sort index as revision 0014 makes it: (tenant, COALESCE(column, -1),
    started_at, agent_id, run_id) on runs."""
    if connection.dialect.name == "sqlite":
        query = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
    else:
        query = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'runs'"
    found = {
        # Postgres writes the constant as it typed it for the bigint column.
        name: " ".join((text or "").split()).replace("('-1'::integer)::bigint", "-1")
        for name, text in connection.exec_driver_sql(query)
    }
    differences: list[Any] = []
    for name, column in RUN_SORT_INDEXES.items():
        text = found.get(name, "")
        parts = ["tenant", f"COALESCE({column}, -1)", "started_at", "agent_id", "run_id"]
        if not text.endswith(" ON runs (" + ", ".join(parts) + ")") and not text.endswith(
            " USING btree (" + ", ".join(parts) + ")"
        ):
            differences.append(("sort index", name, text))
    return differences


async def upgrade_and_compare(url: str) -> None:
    backend = sql_backend(url)
    await backend.start(migrate=False)
    try:
        assert await backend.schema_revision() is None
        await backend.upgrade_schema()
        assert await backend.schema_revision() == head_revision()
        # A second upgrade at head changes nothing.
        await backend.upgrade_schema()
        assert await backend.schema_revision() == head_revision()
        assert await backend.db.inspect(schema_differences, what="test") == []
        tables = await backend.db.inspect(
            lambda conn: set(sa.inspect(conn).get_table_names()), what="test"
        )
        assert tables == expected_tables(backend.db.dialect)
    finally:
        await backend.close()


def run_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bridge_store", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, stdout, stderr


def test_migrations_ship_as_a_package_resource() -> None:
    files = importlib.resources.files("bridge_store_migrations")
    assert files.joinpath("env.py").is_file()
    assert files.joinpath("script.py.mako").is_file()
    versions = [entry.name for entry in files.joinpath("versions").iterdir()]
    assert any(name.startswith("0001_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0002_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0003_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0004_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0005_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0006_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0007_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0008_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0010_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0011_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0012_") and name.endswith(".py") for name in versions)
    assert any(name.startswith("0014_") and name.endswith(".py") for name in versions)
    assert head_revision() == "0014"


async def test_sqlite_upgrades_to_head_with_the_declared_schema(tmp_path: Path) -> None:
    await upgrade_and_compare(f"sqlite:///{tmp_path}/store.db")


@pytest.mark.postgres
async def test_postgres_upgrades_to_head_with_the_declared_schema(
    make_postgres_url: Callable[[], str],
) -> None:
    await upgrade_and_compare(make_postgres_url())


async def test_start_with_migrate_upgrades_and_without_leaves_schema_alone(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    backend = sql_backend(url)
    await backend.start(migrate=False)
    try:
        assert await backend.schema_revision() is None
    finally:
        await backend.close()
    backend = sql_backend(url)
    await backend.start(migrate=True)
    try:
        assert await backend.schema_revision() == head_revision()
    finally:
        await backend.close()


def test_db_commands_upgrade_and_show_the_revision(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nested/dir/store.db"
    # db current only reads: no database yet, and it creates none.
    code, stdout, stderr = finish(run_cli("db", "current", "--store", url))
    assert code == 2
    assert "no database at" in stderr
    assert not (tmp_path / "nested").exists()
    code, stdout, stderr = finish(run_cli("db", "upgrade", "--store", url))
    assert code == 0, stderr
    assert stdout.strip() == f"{url}: upgraded to {head_revision()}"
    code, stdout, stderr = finish(run_cli("db", "current", "--store", url))
    assert code == 0, stderr
    assert stdout.strip() == f"{url}: {head_revision()}"


def has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (read from /proc, Linux)."""
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # it exited, or a descriptor closed while being read
        return False


def test_concurrent_sqlite_upgrades_from_several_processes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    # A busy timeout longer than any wait here: a queued upgrade must wait, not fail.
    url = f"sqlite:///{path}?busy_timeout=120000"
    starters = 4
    # Hold the write lock while the processes start: each opens the file and then
    # waits on that lock, so all of them are upgrading at once when it is released.
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    processes = [run_cli("db", "upgrade", "--store", url) for _ in range(starters)]
    try:
        deadline = time.monotonic() + 120
        while not all(has_open(process.pid, path) for process in processes):
            assert all(process.poll() is None for process in processes), "an upgrade ended early"
            assert time.monotonic() < deadline, "the upgrades never reached the database"
            time.sleep(0.05)
        # Every process is at the database and none can have finished: they overlap.
        assert all(process.poll() is None for process in processes)
    finally:
        holder.execute("COMMIT")
        holder.close()
    # Reap every process before asserting, so a failure leaves no open pipes behind.
    results = [finish(process) for process in processes]
    for code, _, stderr in results:
        assert code == 0, stderr
    with sqlite3.connect(path) as check:
        (revision,) = check.execute(
            "SELECT version_num FROM bridge_store_alembic_version"
        ).fetchall()
        assert revision == (head_revision(),)
    assert sqlite_tables(path) == expected_tables("sqlite")


def sqlite_tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as check:
        rows = check.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


@pytest.mark.postgres
def test_concurrent_postgres_upgrades_queue_on_the_advisory_lock(
    make_postgres_url: Callable[[], str],
) -> None:
    url = make_postgres_url()
    starters = 4

    async def hold_lock_until_all_wait() -> None:
        holder = await asyncpg.connect(url)
        try:
            await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
            processes = [run_cli("db", "upgrade", "--store", url) for _ in range(starters)]
            # Every process reaches the lock and waits: proof that they do race and
            # that the upgrade is serialized by that lock.
            for _ in range(1200):
                waiting = await holder.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND NOT granted AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"
                )
                if waiting == starters or any(p.poll() is not None for p in processes):
                    break
                await asyncio.sleep(0.1)
            assert waiting == starters
            await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        finally:
            await holder.close()
        results = [finish(process) for process in processes]
        for code, _, stderr in results:
            assert code == 0, stderr

    asyncio.run(hold_lock_until_all_wait())
    assert fetch(url, "SELECT version_num FROM bridge_store_alembic_version") == [
        (head_revision(),)
    ]
    tables = {
        row[0] for row in fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    assert tables == EXPECTED_TABLES


#: Rows as release 0.1.0 (schema revision 0001, before tenants) wrote them.
_RELEASE_0001_ROWS = [
    """INSERT INTO agents (agent_id, cwd, updated_at, doc) VALUES ('agent-1', '/w', 2000,
    '{"agentId":"agent-1","cwd":"/w","status":"idle","activeRunId":null,"name":"old",
    "createdAt":1000,"updatedAt":2000,"sdkMetadata":{"blobEncryptionKey":"k"}}')""",
    """INSERT INTO runs (agent_id, run_id, turn_number, doc) VALUES ('agent-1', 'run-1', 1,
    '{"runId":"run-1","agentId":"agent-1","turnNumber":1,"status":"finished"}')""",
    """INSERT INTO run_events (run_id, seq, idempotency_key, doc) VALUES
    ('run-1', 1, 'key-1', '{"runId":"run-1","eventType":"a","idempotencyKey":"key-1"}'),
    ('run-1', 2, NULL, '{"runId":"run-1","eventType":"b","idempotencyKey":null}')""",
    "INSERT INTO run_event_counters (run_id, last_seq) VALUES ('run-1', 2)",
]
_RELEASE_0001_BLOB = sa.text(
    "INSERT INTO checkpoint_blobs (agent_id, blob_id, data) VALUES ('agent-1', 'blob-1', :data)"
)


async def upgrade_a_release_0001_store(url: str) -> None:
    backend = sql_backend(url)
    await backend.start(migrate=False)
    try:
        await backend.db.migrate(lambda conn: upgrade(conn, "0001"), what="test")

        def write(conn: sa.Connection) -> None:
            for statement in _RELEASE_0001_ROWS:
                conn.exec_driver_sql(statement)
            conn.execute(_RELEASE_0001_BLOB, {"data": b"\x01\x02"})

        await backend.db.migrate(write, what="test")
        await backend.upgrade_schema()
        assert await backend.schema_revision() == head_revision()
        assert await backend.db.inspect(schema_differences, what="test") == []
    finally:
        await backend.close()
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=False)
    try:
        # The old rows are tenant default's, and behave as before.
        client = StoreClient(stores=opened.stores, manager=manager)
        old = await client.call("agents", "get", {"agentId": "agent-1"})
        assert old["name"] == "old"
        assert old["sdkMetadata"] == {"blobEncryptionKey": "k"}
        runs = await client.call("runs", "list", {})
        assert [run["runId"] for run in runs["items"]] == ["run-1"]
        events = await client.call("runEvents", "list", {"runId": "run-1"})
        assert [event["seq"] for event in events["items"]] == [1, 2]
        again = await client.call(
            "runEvents", "append", {"runId": "run-1", "eventType": "x", "idempotencyKey": "key-1"}
        )
        assert (again["seq"], again["eventType"]) == (1, "a")
        next_event = await client.call("runEvents", "append", {"runId": "run-1", "eventType": "c"})
        assert next_event["seq"] == 3
        blob = await client.call("checkpoints", "get", {"agentId": "agent-1", "blobId": "blob-1"})
        assert blob == {"found": True, "data": "AQI="}
        # Another tenant sees none of them, and can reuse their ids.
        other = client.as_tenant("team-b")
        assert await other.call("agents", "get", {"agentId": "agent-1"}) is None
        assert (await other.call("runs", "list", {}))["items"] == []
        first = await other.call("runEvents", "append", {"runId": "run-1", "eventType": "y"})
        assert first["seq"] == 1
    finally:
        await opened.close()


async def test_sqlite_store_of_release_0001_upgrades_in_place(tmp_path: Path) -> None:
    await upgrade_a_release_0001_store(f"sqlite:///{tmp_path}/store.db")


@pytest.mark.postgres
async def test_postgres_store_of_release_0001_upgrades_in_place(
    make_postgres_url: Callable[[], str],
) -> None:
    await upgrade_a_release_0001_store(make_postgres_url())


async def test_downgrade_to_0001_keeps_tenant_defaults_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    backend = sql_backend(url)
    await backend.start(migrate=True)
    try:
        await backend.agents.create("default", {"agentId": "a", "cwd": "/w", "updatedAt": 1})
        await backend.agents.create("team-b", {"agentId": "b", "cwd": "/w", "updatedAt": 1})
        await backend.db.migrate(lambda conn: downgrade(conn, "0001"), what="test")
        assert await backend.schema_revision() == "0001"
        rows = await backend.db.read(
            lambda conn: list(conn.execute(sa.text("SELECT agent_id FROM agents"))), what="test"
        )
        assert [tuple(row) for row in rows] == [("a",)]
    finally:
        await backend.close()
