"""The overview's counts: the SQL backend's and the scan's are the same, and stay right.

A store of runs over forty days, of several models and statuses, whose events end tool
calls (completed, failed, some never ending), is counted by the SQL backend (revision
0005's run summaries, 0006's tool counts kept as events are appended) and by reading
every run and event, as the other backends are: the counts must be equal. An append
repeated with its idempotency key, a restore and a deletion keep the tool counts
equal to the log; revision 0006's backfill counts the events stored before it exactly
as appends do. Revision 0011's counts of each run, with its day and model, follow
the run as it is created, moved and deleted, and are filled for counts from before;
the top tools are then one range of one index. The overview made from the
counts (days, models, nearest-rank percentiles, top tools) is tested on its own; money
is tests/test_prices.py's and tests/test_costs.py's.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bridge_store.backend.history import summarize_run
from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.statistics import (
    DAY_MS,
    Counts,
    Duration,
    ToolCount,
    Totals,
    run_statistics,
)
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer.overview import percentile, scan_counts, window
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store_sql import overview
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade
from bridge_store_sql.statements import Session
from bridge_store_sql.tables import TOOL_COUNT_TRIGGERS

from .support.history import message

TENANT = "team-a"
WRITER = Principal(name="writer", tenant=TENANT, scope=Scope.WRITE)
TODAY = 20_600  # a UTC day number (2026-05-27)
SINCE, UNTIL = (TODAY - 39) * DAY_MS, (TODAY + 1) * DAY_MS


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    found: str = request.getfixturevalue("make_postgres_url")()
    return found


def tool_event(agent_id: str, run_id: str, call: str, name: Any, status: str) -> dict[str, Any]:
    body = {"type": "tool_call", "call_id": call, "name": name, "status": status}
    return message(agent_id, run_id, body)


async def write(client: StoreClient, rng: random.Random) -> None:
    for n in range(80):
        agent_id, run_id = f"agent-{n % 5}", f"run-{n:03}"
        start = (TODAY - rng.randrange(-3, 42)) * DAY_MS + rng.randrange(DAY_MS)
        fields: dict[str, Any] = {
            "status": rng.choice(["finished", "error", "error", "running", "cancelled"]),
            "model": rng.choice([{"id": "composer-2"}, {"id": "gpt-5"}, None]),
            "startedAt": start,
            "endedAt": rng.choice([start + rng.randrange(1, 900_000), None]),
            "usage": rng.choice(
                [None, {"inputTokens": rng.randrange(9_000), "cacheWriteTokens": 7}]
            ),
        }
        await client.call("runs", "create", {"run": run(run_id, agent_id, **fields)})
        for call in range(rng.randrange(4)):
            name = rng.choice(["read_file", "edit_file", "run_terminal_cmd", None, "x\u0000y"])
            await client.call(
                "runEvents", "append", tool_event(agent_id, run_id, f"c{call}", name, "running")
            )
            ending = rng.choice(["completed", "completed", "error", None])
            if ending is not None:
                event = tool_event(agent_id, run_id, f"c{call}", name, ending)
                if rng.random() < 0.3:
                    event["idempotencyKey"] = f"{run_id}-{call}"
                    # The bridge's retry of a stored append: counted once.
                    await client.call("runEvents", "append", event)
                await client.call("runEvents", "append", event)
        text = {"type": "assistant", "message": {"role": "assistant", "content": []}}
        await client.call("runEvents", "append", message(agent_id, run_id, text))


@pytest.fixture
async def opened(url: str) -> AsyncIterator[OpenStores]:
    manager = get_plugin_manager()
    stores = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        client = StoreClient(stores=stores.stores, manager=manager, principal=WRITER)
        await write(client, random.Random(7))
        # Another tenant's tool calls are not ours.
        other = dataclasses.replace(client, principal=dataclasses.replace(WRITER, tenant="b"))
        await other.call("runs", "create", {"run": run("run-000", "agent-0", startedAt=SINCE)})
        await other.call(
            "runEvents", "append", tool_event("agent-0", "run-000", "c", "secret", "error")
        )
        yield stores
    finally:
        await stores.close()


def normal(counts: Counts) -> tuple[list[Any], ...]:
    return (
        sorted(counts.totals, key=repr),
        sorted(counts.durations, key=repr),
        sorted(counts.tools, key=repr),
    )


async def counted(opened: OpenStores) -> tuple[Counts, Counts]:
    stores = opened.stores
    index = run_statistics(stores.agents, stores.runs)
    assert index is not None
    reader = HistoryReader(in_process(lambda: stores, WRITER))
    indexed = await index.counts(TENANT, since=SINCE, until=UNTIL)
    return indexed, await scan_counts(reader, since=SINCE, until=UNTIL)


async def test_the_backend_counts_what_reading_the_history_counts(opened: OpenStores) -> None:
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    reader = HistoryReader(in_process(lambda: opened.stores, WRITER))
    starts = [summarize_run(doc).started_at or 0 async for b in reader.every_run() for doc in b]
    in_range = [start for start in starts if SINCE <= start < UNTIL]
    assert 0 < len(in_range) < len(starts)
    assert sum(row.runs for row in indexed.totals) == len(in_range)
    tools = {row.tool for row in indexed.tools}
    assert {"read_file", "edit_file", "run_terminal_cmd", "tool"} <= tools
    assert "secret" not in tools
    assert sum(row.failures for row in indexed.tools) > 0


async def test_restored_and_deleted_events_keep_the_tool_counts_right(
    opened: OpenStores,
) -> None:
    stores = opened.stores
    client = StoreClient(stores=stores, manager=get_plugin_manager(), principal=WRITER)
    log = (await client.call("runEvents", "list", {"runId": "run-001", "limit": 1000}))["items"]
    assert any("tool_call" in str(event) for event in log)
    await client.call("runs", "create", {"run": run("run-copy", "agent-1", startedAt=SINCE)})
    copied = [{**event, "runId": "run-copy"} for event in log]
    assert await stores.run_events.restore(TENANT, "run-copy", copied) == len(log)
    # Restoring again adds nothing, so counts nothing.
    assert await stores.run_events.restore(TENANT, "run-copy", copied) == 0
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    await client.call("runEvents", "delete", {"filter": {"runIds": ["run-001", "run-002"]}})
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    await client.call("runEvents", "delete", {"filter": {}})
    indexed, scanned = await counted(opened)
    assert indexed.tools == scanned.tools == []


async def test_tool_counts_follow_their_run_created_moved_and_deleted(
    opened: OpenStores,
) -> None:
    client = StoreClient(stores=opened.stores, manager=get_plugin_manager(), principal=WRITER)
    # Counted before its run exists: in no range until the run is created.
    await client.call(
        "runEvents", "append", tool_event("agent-9", "run-late", "c", "late_tool", "error")
    )
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    assert "late_tool" not in {row.tool for row in indexed.tools}
    late = run("run-late", "agent-9", startedAt=SINCE + 5, model={"id": "m-late"})
    await client.call("runs", "create", {"run": late})
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    assert [(r.day, r.model, r.tool) for r in indexed.tools if r.tool == "late_tool"] == [
        (SINCE // DAY_MS, "m-late", "late_tool")
    ]
    # Moved to another day and model, then out of the range, then deleted.
    for fields in ({"startedAt": UNTIL - 1, "model": {"id": "m-2"}}, {"startedAt": UNTIL}):
        await client.call("runs", "update", {"run": {**late, **fields}})
        indexed, scanned = await counted(opened)
        assert normal(indexed) == normal(scanned)
    await client.call("runs", "update", {"run": late})
    await client.call("runs", "delete", {"filter": {"runIds": ["run-late", "run-001"]}})
    indexed, scanned = await counted(opened)
    assert normal(indexed) == normal(scanned)
    assert "late_tool" not in {row.tool for row in indexed.tools}


async def test_a_range_not_on_day_bounds_counts_tools_exactly(opened: OpenStores) -> None:
    stores = opened.stores
    index = run_statistics(stores.agents, stores.runs)
    assert index is not None
    reader = HistoryReader(in_process(lambda: stores, WRITER))
    since, until = SINCE + DAY_MS // 3, UNTIL - DAY_MS // 2
    indexed = await index.counts(TENANT, since=since, until=until)
    assert normal(indexed) == normal(await scan_counts(reader, since=since, until=until))


# SQLite's plan (EXPLAIN QUERY PLAN): on a table this small Postgres rightly scans it.
@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
async def test_the_top_tools_read_one_index_range_in_group_order(
    url: str, opened: OpenStores
) -> None:
    backend = opened.backends[0]
    assert isinstance(backend, SqlBackend)
    query = overview.tools_query(TENANT, SINCE, UNTIL)

    def plan(conn: Session) -> list[str]:
        compiled = query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
        return [row[3] for row in conn.execute(sa.text(f"EXPLAIN QUERY PLAN {compiled}"))]

    steps = await backend.db.read(plan, what="test")
    assert len(steps) == 1, steps
    assert steps[0].startswith("SEARCH run_tool_days USING COVERING INDEX ix_run_tool_days_day")


async def test_the_tool_count_triggers_come_and_go_with_revision_0011(url: str) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)
    sqlite = url.startswith("sqlite")
    names = sa.text(
        "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        if sqlite
        else "SELECT tgname AS name FROM pg_trigger WHERE NOT tgisinternal"
    ).columns(sa.column("name", sa.Text()))

    def triggers(conn: Session) -> set[str]:
        return {row[0] for row in conn.execute(names)} & TOOL_COUNT_TRIGGERS

    try:
        assert await backend.db.read(triggers, what="test") == TOOL_COUNT_TRIGGERS
        await backend.db.migrate(lambda conn: downgrade(conn, "0010"), what="test")
        assert await backend.db.read(triggers, what="test") == set()
    finally:
        await backend.close()


@pytest.mark.parametrize("revision", ["0005", "0007"])
async def test_the_backfill_counts_old_events_as_appends_do(
    url: str, opened: OpenStores, revision: str
) -> None:
    before, _ = await counted(opened)
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=False)
    try:
        await backend.db.migrate(lambda conn: downgrade(conn, revision), what="test")
        await backend.upgrade_schema()
    finally:
        await backend.close()
    after, scanned = await counted(opened)
    assert normal(after) == normal(before) == normal(scanned)


# -- the overview made of counts ---------------------------------------------------------


def counts() -> Counts:
    return Counts(
        totals=[
            Totals(TODAY, "composer-2", 4, 1, 1_000_000, 200_000, 0, 10),
            Totals(TODAY - 1, "gpt-5", 2, 2, 500_000, 0, 3_000_000, 0),
            Totals(TODAY - 10, "composer-2", 1, 0, 1, 1, 1, 1),
            Totals(TODAY, None, 1, 0, 0, 0, 0, 0),
        ],
        durations=[Duration(TODAY, "composer-2", ms) for ms in (400, 100, 300, 200)]
        + [Duration(TODAY - 10, "composer-2", 9_000)],
        tools=[
            ToolCount(TODAY, "composer-2", "read_file", 9, 0),
            ToolCount(TODAY, "composer-2", "run_terminal_cmd", 3, 2),
            ToolCount(TODAY - 1, "gpt-5", "run_terminal_cmd", 4, 4),
            ToolCount(TODAY - 10, "composer-2", "grep", 50, 0),
        ],
    )


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([100, 200, 300, 400], 50) == 200
    assert percentile([100, 200, 300, 400], 95) == 400
    assert percentile(list(range(1, 101)), 95) == 95
    assert percentile([7], 95) == 7


def test_a_window_counts_its_days_models_and_tools() -> None:
    week = window(counts(), today=TODAY, days=7)
    assert (week["from"], week["to"]) == ("2026-05-21", "2026-05-27")
    assert [day["day"] for day in week["byDay"]][:2] == ["2026-05-27", "2026-05-26"]
    assert len(week["byDay"]) == 7
    total = week["total"]
    assert (total["runs"], total["failed"], total["medianMs"], total["p95Ms"]) == (7, 3, 200, 400)
    assert total["tokens"]["inputTokens"] == 1_500_000
    assert [t["tool"] for t in total["tools"]["byCalls"]] == ["read_file", "run_terminal_cmd"]
    assert total["tools"]["byFailures"] == [{"tool": "run_terminal_cmd", "calls": 7, "failures": 6}]
    assert [m["model"] for m in week["byModel"]] == ["composer-2", "gpt-5", "(none)"]
    month = window(counts(), today=TODAY, days=30)
    assert month["total"]["runs"] == 8
    assert month["total"]["tools"]["byCalls"][0] == {"tool": "grep", "calls": 50, "failures": 0}
