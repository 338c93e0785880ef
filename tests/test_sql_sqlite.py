"""The SQL backend on SQLite: the conformance suite, plus what only SQLite has."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import AgentPosition, BlobRef, RunPosition
from bridge_store.conformance import ExportQueueConformance, LeaseConformance, StoreConformance
from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store.rpc.contract import new_event
from bridge_store_sql import agents, checkpoints, events, runs
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.settings import SqliteSettings, parse_sqlite


class TestSqliteBackend(StoreConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"


class TestSqliteLeases(LeaseConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"


class TestSqliteExportQueue(ExportQueueConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"


class SqlBackendChecks:
    """Behaviour of the SQL backend on any dialect; needs a ``sql_url`` fixture (a fresh
    store, migrated or not) and an ``unmigrated_sql_url`` one (a fresh empty database)."""

    async def test_filters_with_more_ids_than_a_statement_can_bind(self, sql_url: str) -> None:
        backend = await started(sql_url)
        try:
            for index in range(10):
                await backend.agents.create(
                    "default", {"agentId": f"a{index}", "cwd": "/w", "updatedAt": 1}
                )
                await backend.runs.create(
                    "default", {"runId": f"r{index}", "agentId": "a0", "turnNumber": 1}
                )
                await backend.checkpoints.create("default", f"a{index}", "blob", b"x")
                await backend.run_events.append(
                    "default", new_event({"runId": f"r{index}", "eventType": "t"}, "in")
                )
            many = [f"missing-{n}" for n in range(40_000)]
            listed = await backend.runs.list(
                "default", agent_ids=None, run_ids=[*many, "r3", "r1"], after=None, limit=10
            )
            assert [run["runId"] for run in listed] == ["r1", "r3"]
            refs = await backend.checkpoints.list(
                "default", agent_ids=[*many, "a2"], blob_ids=None, after=None, limit=10
            )
            assert [ref.agent_id for ref in refs] == ["a2"]
            await backend.agents.delete("default", [*many, "a1", "a2"], None)
            await backend.runs.delete("default", None, [*many, "r1"])
            await backend.run_events.delete("default", [*many, "r1"])
            await backend.checkpoints.delete("default", [*many, "a1"], None)
            assert len(await backend.agents.list("default", cwd=None, after=None, limit=100)) == 8
            assert (
                len(
                    await backend.runs.list(
                        "default", agent_ids=None, run_ids=None, after=None, limit=100
                    )
                )
                == 9
            )
            assert await backend.run_events.list("default", "r1", after_seq=0, limit=10) == []
            assert len(await backend.run_events.list("default", "r2", after_seq=0, limit=10)) == 1
            assert await backend.checkpoints.get("default", "a1", "blob") is None
        finally:
            await backend.close()

    async def test_unmigrated_database_answers_unavailable_with_the_fix(
        self, unmigrated_sql_url: str
    ) -> None:
        backend = open_backend(get_plugin_manager(), unmigrated_sql_url)
        await backend.start(migrate=False)
        try:
            assert backend.agents is not None
            with pytest.raises(ConnectError) as caught:
                await backend.agents.get("default", "a")
            assert caught.value.code == Code.UNAVAILABLE
            assert "bridge-store db upgrade" in caught.value.message
        finally:
            await backend.close()


class TestSqliteChecks(SqlBackendChecks):
    @pytest.fixture
    def sql_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"

    @pytest.fixture
    def unmigrated_sql_url(self, sql_url: str, tmp_path: Path) -> str:
        # An empty file: a start without migration creates no database.
        (tmp_path / "store.db").touch(mode=0o600)
        return sql_url


async def started(url: str) -> SqlBackend:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)
    return backend


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[SqlBackend]:
    opened = await started(f"sqlite:///{tmp_path}/store.db")
    try:
        yield opened
    finally:
        await opened.close()


# -- URLs ------------------------------------------------------------------------------


def test_url_forms() -> None:
    assert parse_sqlite("sqlite:///relative.db") == SqliteSettings(path=Path("relative.db"))
    assert parse_sqlite("sqlite:///dir/rel.db").path == Path("dir/rel.db")
    assert parse_sqlite("sqlite:////abs/path.db").path == Path("/abs/path.db")
    assert parse_sqlite("sqlite:///x.db?busy_timeout=250").busy_timeout_ms == 250


def test_sqlite_is_the_only_sqlite_scheme() -> None:
    # sqlite+aiosqlite, a spelling from before the SQLite worker threads, is gone.
    with pytest.raises(ConfigurationError, match=r"no installed backend serves sqlite\+aiosqlite"):
        open_backend(get_plugin_manager(), "sqlite+aiosqlite:///x.db")


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sqlite://", "name a database file"),
        ("sqlite:///:memory:", "memory://"),
        ("sqlite://host/x.db", "no host"),
        ("sqlite:///x.db?journal=off", "unknown parameter 'journal'"),
        ("sqlite:///x.db?busy_timeout=soon", "busy_timeout"),
    ],
)
def test_bad_urls_are_configuration_errors(url: str, complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        open_backend(get_plugin_manager(), url)


async def test_relative_path_and_missing_parent_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend = await started("sqlite:///nested/deeper/store.db")
    try:
        await backend.agents.create("default", {"agentId": "a", "cwd": "/w", "updatedAt": 1})
    finally:
        await backend.close()
    assert (tmp_path / "nested" / "deeper" / "store.db").is_file()


async def test_database_is_in_wal_mode_with_documents_as_given(
    backend: SqlBackend, tmp_path: Path
) -> None:
    doc = {"agentId": "a", "cwd": "/w", "updatedAt": 2**53, "zeta": 1, "alpha": [1.5, None]}
    await backend.agents.create("default", doc)
    with sqlite3.connect(tmp_path / "store.db") as check:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        ((text,),) = check.execute("SELECT doc FROM agents").fetchall()
    assert (
        text
        == '{"agentId":"a","cwd":"/w","updatedAt":9007199254740992,"zeta":1,"alpha":[1.5,null]}'
    )


async def test_a_new_database_and_its_wal_and_shm_are_the_owners_alone(
    backend: SqlBackend, tmp_path: Path
) -> None:
    # They hold every agent's blobEncryptionKey; SQLite alone made them 0644.
    await backend.agents.create("default", {"agentId": "a", "cwd": "/w", "updatedAt": 1})
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


async def test_an_existing_database_others_can_read_is_warned_about_and_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "shared.db"
    sqlite3.connect(path).close()
    path.chmod(0o644)
    backend = await started(f"sqlite:///{path}")
    await backend.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"SQLite database {path} can be read by other users (mode 644) and holds every "
        f"agent's blobEncryptionKey: chmod 600 {path}"
    ]


# -- several writers -------------------------------------------------------------------


async def test_two_backends_on_one_file_write_without_locking_errors(tmp_path: Path) -> None:
    """Two backends (two engines, two writer locks) contend like two processes would.

    Keyed appends read before they write: without BEGIN IMMEDIATE, such a transaction
    fails at once with "database is locked" when another connection wrote meanwhile.
    """
    url = f"sqlite:///{tmp_path}/store.db"
    first, second = await started(url), await started(url)
    try:

        async def append(backend: SqlBackend, index: int, key: str | None) -> dict[str, Any]:
            assert backend.run_events is not None
            data = {"runId": "shared", "eventType": "t", "payload": index, "idempotencyKey": key}
            return await backend.run_events.append("default", new_event(data, "in"))

        async def create(backend: SqlBackend, index: int) -> None:
            await backend.agents.create(
                "default", {"agentId": f"a{index}", "cwd": "/w", "updatedAt": 1}
            )

        plain = [append(first if n % 2 else second, n, None) for n in range(150)]
        # Each key is appended four times, from both backends.
        keyed = [append(first if n % 2 else second, n, f"k{n // 4}") for n in range(200)]
        created = [create(first if n % 2 else second, n) for n in range(50)]
        results = await asyncio.gather(*plain, *keyed, *created)
        listed = await first.run_events.list("default", "shared", after_seq=0, limit=1000)
        assert [event["seq"] for event in listed] == list(range(1, 201))
        by_key = {event["idempotencyKey"]: event for event in listed if event["idempotencyKey"]}
        assert len(by_key) == 50
        for result in results[150:350]:
            assert result == by_key[result["idempotencyKey"]]
        assert len(await second.agents.list("default", cwd=None, after=None, limit=100)) == 50
    finally:
        await first.close()
        await second.close()


APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from bridge_store.rpc.contract import new_event
    from bridge_store.backend.plugins import get_plugin_manager, open_backend

    async def main(url, name, count):
        backend = open_backend(get_plugin_manager(), url)
        await backend.start(migrate=True)
        try:
            for index in range(count):
                event = new_event(
                    {"runId": "shared", "eventType": "t", "payload": [name, index]}, "in"
                )
                await backend.run_events.append("default", event)
        finally:
            await backend.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def test_processes_appending_to_one_file_keep_seq_gapless(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, url, f"p{n}", "150"],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for n in range(4)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    with sqlite3.connect(tmp_path / "store.db") as check:
        seqs = [row[0] for row in check.execute("SELECT seq FROM run_events ORDER BY seq")]
    assert seqs == list(range(1, 601))


# -- query plans -----------------------------------------------------------------------


def plan(connection: sqlite3.Connection, query: sa.Select[Any]) -> list[str]:
    sql = str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    return [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]


@pytest.mark.parametrize(
    "query",
    [
        agents.list_query("default", cwd=None, after=AgentPosition(500, "agent-1"), limit=51),
        agents.list_query("default", cwd="/work/7", after=AgentPosition(500, "agent-1"), limit=51),
        runs.list_query(
            "default",
            agent_ids=None,
            run_ids=None,
            after=RunPosition(50, "run-05050", "a"),
            limit=51,
        ),
        runs.list_query(
            "default",
            agent_ids=["heavy"],
            run_ids=None,
            after=RunPosition(50, "run-05050", "a"),
            limit=51,
        ),
        runs.list_query(
            "default",
            agent_ids=None,
            run_ids=["run-05050"],
            after=RunPosition(50, "run", "a"),
            limit=51,
        ),
        events.list_query("default", "big", after_seq=5000, limit=101),
        checkpoints.list_query(
            "default", agent_ids=None, blob_ids=None, after=BlobRef("8", "a"), limit=51
        ),
        checkpoints.list_query(
            "default", agent_ids=["heavy"], blob_ids=None, after=BlobRef("8", "a"), limit=51
        ),
    ],
)
async def test_lists_are_index_range_scans_in_list_order(
    backend: SqlBackend, tmp_path: Path, query: sa.Select[Any]
) -> None:
    with sqlite3.connect(tmp_path / "store.db") as connection:
        connection.executemany(
            "INSERT INTO agents (tenant, agent_id, cwd, updated_at, doc) "
            "VALUES ('default', ?, ?, ?, '{}')",
            ((f"agent-{i:05d}", f"/work/{i % 100}", i // 2) for i in range(10_000)),
        )
        connection.executemany(
            "INSERT INTO runs (tenant, agent_id, run_id, turn_number, doc) "
            "VALUES ('default', ?, ?, ?, '{}')",
            (
                ("heavy" if i < 5_000 else f"agent-{i % 100}", f"run-{i:05d}", i % 100)
                for i in range(10_000)
            ),
        )
        connection.executemany(
            "INSERT INTO run_events VALUES ('default', 'big', ?, NULL, '{}')",
            ((i,) for i in range(10_000)),
        )
        connection.executemany(
            "INSERT INTO checkpoint_blobs VALUES ('default', ?, ?, x'')",
            (("heavy" if i < 5_000 else f"agent-{i % 100}", f"{i:x}") for i in range(10_000)),
        )
        connection.execute("ANALYZE")
        steps = plan(connection, query)
    assert len(steps) == 1, steps
    assert steps[0].startswith("SEARCH "), steps
    assert "INDEX" in steps[0], steps
    assert ">" in steps[0] or "<" in steps[0], steps
    assert not any("TEMP B-TREE" in step for step in steps), steps
