"""Contention the database reports as an error reaches clients as ``unavailable``.

SQLite answers "database is locked" once another writer has held the file's lock
past ``busy_timeout``; Postgres aborts a statement with serialization_failure (40001)
or deadlock_detected (40P01). Each means "try again" and nothing was stored, so the
client gets ``unavailable`` (503), never ``internal``, and the server goes on serving.
Postgres' two errors are raised by a trigger, so they come through the real driver
exactly as the database reports them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge_store.conformance.harness import agent
from bridge_store.errors import Code, ConnectError
from testkit.services import execute

from .support.server import ServerProcess, serve


def refused_as_unavailable(server: ServerProcess, substore: str, method: str, data: object) -> str:
    with pytest.raises(ConnectError) as caught:
        server.call(substore, method, data)
    assert caught.value.code == Code.UNAVAILABLE, caught.value
    return caught.value.message


def test_sqlite_locked_past_the_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with serve("--store", f"sqlite:///{path}?busy_timeout=100") as server:
        server.call("agents", "create", {"agent": agent("before")})
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process's writer, holding on
            message = refused_as_unavailable(server, "agents", "create", {"agent": agent("during")})
            assert "database is locked" in message
            refused_as_unavailable(server, "runEvents", "append", {"runId": "r", "eventType": "t"})
            # Readers never wait in WAL mode.
            assert server.call("agents", "get", {"agentId": "before"})["agentId"] == "before"
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert server.call("agents", "get", {"agentId": "during"}) is None
        server.call("agents", "create", {"agent": agent("after")})
        appended = server.call("runEvents", "append", {"runId": "r", "eventType": "t"})
        assert appended["seq"] == 1


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sqlstate",
    [
        pytest.param("40001", id="serialization_failure"),
        pytest.param("40P01", id="deadlock_detected"),
    ],
)
def test_postgres_serialization_failure_and_deadlock_are_unavailable(
    make_migrated_postgres_url: Callable[[], str], sqlstate: str
) -> None:
    url = make_migrated_postgres_url()
    with serve("--store", url) as server:
        server.call("agents", "create", {"agent": agent("before")})
        execute(
            url,
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"RAISE EXCEPTION 'refused for the test' USING ERRCODE = '{sqlstate}'; END $$",
            "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON agents "
            "FOR EACH ROW EXECUTE FUNCTION refuse()",
            "CREATE TRIGGER refuse BEFORE INSERT ON run_events "
            "FOR EACH ROW EXECUTE FUNCTION refuse()",
        )
        message = refused_as_unavailable(server, "agents", "create", {"agent": agent("during")})
        assert sqlstate in message
        refused_as_unavailable(server, "agents", "update", {"agent": agent("before", updated_at=2)})
        refused_as_unavailable(server, "runEvents", "append", {"runId": "r", "eventType": "t"})
        execute(url, "DROP TRIGGER refuse ON agents", "DROP TRIGGER refuse ON run_events")
        # Nothing of the refused calls was stored; the same server serves on.
        assert server.call("agents", "get", {"agentId": "during"}) is None
        assert server.call("agents", "get", {"agentId": "before"})["updatedAt"] == 1000
        assert server.call("runEvents", "append", {"runId": "r", "eventType": "t"})["seq"] == 1
        assert server.process.poll() is None
