"""Who started it: the creating token's name, kept beside the bridge's documents.

The recorded bridge traffic, replayed as a named token on every backend, reads back
exactly as it was recorded (the documents are never changed), while each agent and run
the replay created names that token. On SQL stores the record arrives with schema
revision 0004: rows from before it have none (shown as "unknown"), and the way back
down drops the record and leaves the documents as they were.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.conformance.harness import StoreClient, agent, run
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade, head_revision

TRAFFIC = Path(__file__).parent.parent / "bench" / "data" / "bridge-traffic.jsonl"
ALICE = Principal(name="alice@laptop", tenant="team-a", scope=Scope.WRITE)

BACKENDS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=BACKENDS)
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStores]:
    url_of: dict[str, Callable[[], str]] = {
        "memory": lambda: "memory://",
        "sqlite": lambda: f"sqlite:///{tmp_path / 'store.db'}",
        "postgres": lambda: request.getfixturevalue("make_postgres_url")(),
        "redis": lambda: request.getfixturevalue("make_redis_url")(),
        "s3": lambda: request.getfixturevalue("make_s3_url")(),
    }
    stores = await open_stores(
        get_plugin_manager(), Routes.single(url_of[request.param]()), migrate=True
    )
    try:
        yield stores
    finally:
        await stores.close()


def recorded() -> list[dict[str, Any]]:
    return [
        line for line in map(json.loads, TRAFFIC.read_text().splitlines()) if "substore" in line
    ]


def ordered(value: Any) -> str:
    """JSON text that keeps key order: equal only if fields and their order are equal."""
    return json.dumps(value, ensure_ascii=False)


def opaque_cursor(output: Any) -> Any:
    """A list answer with its cursor's value hidden: cursors are each store's own."""
    if isinstance(output, dict) and "nextCursor" in output:
        return {**output, "nextCursor": "..."}
    return output


def without_times(output: Any) -> Any:
    """An event answer without ``createdAt``, which the server stamps at each append."""
    if isinstance(output, dict) and "items" in output:
        return {**output, "items": [without_times(item) for item in output["items"]]}
    if isinstance(output, dict):
        return {key: value for key, value in output.items() if key != "createdAt"}
    return output


async def test_recorded_traffic_reads_back_as_recorded_with_its_creator_beside(
    opened: OpenStores,
) -> None:
    client = StoreClient(stores=opened.stores, manager=get_plugin_manager(), principal=ALICE)
    created: dict[str, set[Any]] = {"agents": set(), "runs": set()}
    for line in recorded():
        substore, method = line["substore"], line["method"]
        output = await client.call(substore, method, line["input"])
        if substore == "runEvents":
            assert ordered(without_times(output)) == ordered(without_times(line["output"]))
        else:
            assert ordered(opaque_cursor(output)) == ordered(opaque_cursor(line["output"]))
        if method == "create" and substore == "agents":
            created["agents"].add(line["input"]["agent"]["agentId"])
        elif method == "create" and substore == "runs":
            doc = line["input"]["run"]
            created["runs"].add((doc["agentId"], doc["runId"]))
    # The recording deletes its first agent with its runs: the second is left.
    [kept] = (await client.call("agents", "list", {}))["items"]
    agent_ids = sorted(created["agents"])
    assert await opened.stores.agents.creators(ALICE.tenant, agent_ids) == {
        kept["agentId"]: ALICE.name
    }
    runs = sorted(created["runs"])
    kept_runs = {key for key in runs if key[0] == kept["agentId"]}
    assert kept_runs
    assert await opened.stores.runs.creators(ALICE.tenant, runs) == dict.fromkeys(
        kept_runs, ALICE.name
    )
    # Another tenant's token sees nothing of it.
    assert await opened.stores.agents.creators("team-b", agent_ids) == {}


# -- schema revision 0004 ----------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    url: str = request.getfixturevalue("make_postgres_url")()
    return url


async def migrate(url: str, revision: str, *, down: bool = False) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:
        if down:
            await backend.db.migrate(lambda conn: downgrade(conn, revision), what="test")
        else:
            await backend.upgrade_schema()
        assert await backend.schema_revision() == revision
    finally:
        await backend.close()


async def test_revision_0004_adds_the_record_beside_old_rows_and_takes_it_away(
    database_url: str,
) -> None:
    manager = get_plugin_manager()
    old_agent, old_run = agent("agent-old"), run("run-old", "agent-old")

    async def store(upgrade: bool) -> OpenStores:
        return await open_stores(manager, Routes.single(database_url), migrate=upgrade)

    # A store written at 0003, before any creator was kept.
    opened = await store(True)
    await opened.close()
    await migrate(database_url, "0003", down=True)
    backend = open_backend(manager, database_url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:

        def write(conn: sa.Connection) -> None:
            for table, values in (
                ("agents", {"agent_id": "agent-old", "cwd": "/work/a", "updated_at": 1000}),
                ("runs", {"agent_id": "agent-old", "run_id": "run-old", "turn_number": 1}),
            ):
                doc = old_agent if table == "agents" else old_run
                row = {"tenant": "team-a", **values, "doc": json.dumps(doc)}
                columns = ", ".join(row)
                marks = ", ".join(f":{name}" for name in row)
                conn.execute(sa.text(f"INSERT INTO {table} ({columns}) VALUES ({marks})"), row)  # noqa: S608

        await backend.db.migrate(write, what="test")
    finally:
        await backend.close()

    await migrate(database_url, head_revision())
    opened = await store(False)
    try:
        client = StoreClient(stores=opened.stores, manager=manager, principal=ALICE)
        assert await client.call("agents", "get", {"agentId": "agent-old"}) == old_agent
        await client.call("agents", "create", {"agent": agent("agent-new")})
        await client.call("runs", "create", {"run": run("run-new", "agent-new")})
        agents = opened.stores.agents
        assert await agents.creators("team-a", ["agent-old", "agent-new"]) == {
            "agent-new": ALICE.name
        }
        runs = [("agent-old", "run-old"), ("agent-new", "run-new")]
        assert await opened.stores.runs.creators("team-a", runs) == {runs[1]: ALICE.name}
    finally:
        await opened.close()

    await migrate(database_url, "0003", down=True)
    backend = open_backend(manager, database_url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:

        def columns(conn: sa.Connection) -> dict[str, list[str]]:
            inspector = sa.inspect(conn)
            return {t: [c["name"] for c in inspector.get_columns(t)] for t in ("agents", "runs")}

        found = await backend.db.inspect(columns, what="test")
        assert "created_by" not in found["agents"]
        assert "created_by" not in found["runs"]
    finally:
        await backend.close()
    opened = await store(True)
    try:
        client = StoreClient(stores=opened.stores, manager=manager, principal=ALICE)
        assert await client.call("agents", "get", {"agentId": "agent-old"}) == old_agent
        assert (await client.call("agents", "get", {"agentId": "agent-new"}))["agentId"] == (
            "agent-new"
        )
        # Taken away and back: the record is gone, the documents are not.
        assert await opened.stores.agents.creators("team-a", ["agent-old", "agent-new"]) == {}
    finally:
        await opened.close()
