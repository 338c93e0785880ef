"""Tool counts stay exact whatever order a run's create and its events arrive in, and
whichever agents hold runs of one run id.

On Postgres a run's ``create`` and the append of its first tool call, arriving at the
same moment on two connections, lost the count: revision 0008's triggers each looked
for the other's row before it was committed, so 20 of 150 tool calls were counted and
the rest kept no day. Here many runs are created while their first tool calls are
appended, in both orders, on the backend's pool of connections, and the overview's
counts must equal a scan of the history. The upgrade to revision 0011 repairs counts
such races (or anything else) left wrong: it counts the events again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade
from bridge_store_sql.statements import Session

from .test_overview import SINCE, TENANT, WRITER, counted, normal, tool_event, url

__all__ = ["url"]  # the fixture, imported to be used here

RUNS = 150


@pytest.fixture
async def empty(url: str) -> AsyncIterator[OpenStores]:
    stores = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        yield stores
    finally:
        await stores.close()


def client_of(opened: OpenStores) -> StoreClient:
    return StoreClient(stores=opened.stores, manager=get_plugin_manager(), principal=WRITER)


def backend_of(opened: OpenStores) -> SqlBackend:
    backend = opened.backends[0]
    assert isinstance(backend, SqlBackend)
    return backend


async def race(client: StoreClient) -> int:
    """Creates RUNS runs while their first tool calls are appended; how many calls."""

    async def one(n: int) -> None:
        agent_id, run_id = f"agent-{n % 3}", f"run-{n:03}"
        created = client.call(
            "runs", "create", {"run": run(run_id, agent_id, startedAt=SINCE + n * 60_000)}
        )
        calls = [
            client.call(
                "runEvents", "append", tool_event(agent_id, run_id, f"c{k}", "grep", "completed")
            )
            for k in range(1 + n % 2)
        ]
        # Half the runs ask for their create first, half for their appends.
        await asyncio.gather(*([created, *calls] if n % 2 else [*calls, created]))

    await asyncio.gather(*(one(n) for n in range(RUNS)))
    return sum(1 + n % 2 for n in range(RUNS))


async def test_a_run_s_create_racing_its_first_tool_calls_counts_every_one(
    empty: OpenStores,
) -> None:
    expected = await race(client_of(empty))
    indexed, scanned = await counted(empty)
    assert sum(row.calls for row in scanned.tools) == expected
    assert sum(row.calls for row in indexed.tools) == expected
    assert normal(indexed) == normal(scanned)


async def test_the_upgrade_from_0010_counts_again_what_was_lost_or_wrong(
    empty: OpenStores,
) -> None:
    backend = backend_of(empty)
    await backend.db.migrate(lambda conn: downgrade(conn, "0010"), what="test")
    expected = await race(client_of(empty))  # under 0008's triggers

    def damage(conn: Session) -> int:
        # Wrong as a bug could have left them: a count too high, one gone, one dayless.
        conn.execute(
            sa.text("UPDATE run_tool_calls SET calls = calls + 5 WHERE run_id = 'run-000'")
        )
        conn.execute(sa.text("DELETE FROM run_tool_calls WHERE run_id = 'run-001'"))
        conn.execute(sa.text("UPDATE run_tool_calls SET day = NULL WHERE run_id = 'run-002'"))
        dayless = "SELECT coalesce(sum(calls), 0) FROM run_tool_calls WHERE day IS NOT NULL"
        return int(conn.execute(sa.text(dayless)).scalar_one())

    with_a_day = await backend.db.write(damage, what="test", atomic=True, retry=False)
    assert with_a_day != expected  # the overview of 0010 would have counted these
    await backend.upgrade_schema()
    indexed, scanned = await counted(empty)
    assert sum(row.calls for row in indexed.tools) == expected
    assert normal(indexed) == normal(scanned)


async def test_a_run_id_under_a_second_agent_deleted_from_the_first_keeps_its_count(
    empty: OpenStores,
) -> None:
    """The SQL overview dropped the tool call while the run and its event remained."""
    client = client_of(empty)
    await client.call("runs", "create", {"run": run("run-x", "agent-1", startedAt=SINCE)})
    event = tool_event("agent-1", "run-x", "c", "grep", "completed")
    await client.call("runEvents", "append", event)
    moved = run("run-x", "agent-2", startedAt=SINCE + 1, model={"id": "m-2"})
    await client.call("runs", "create", {"run": moved})
    indexed, scanned = await counted(empty)
    # Two runs of one run id: a scan counts the events for each.
    assert sum(row.calls for row in scanned.tools) == 2
    assert normal(indexed) == normal(scanned)
    await client.call("runs", "delete", {"filter": {"agentIds": ["agent-1"]}})
    indexed, scanned = await counted(empty)
    assert [(row.model, row.calls) for row in scanned.tools] == [("m-2", 1)]
    assert normal(indexed) == normal(scanned)


async def test_one_statement_inserting_many_runs_and_counts_keeps_them_exact(
    empty: OpenStores,
) -> None:
    """One lock per run id ran Postgres out of lock slots ("out of shared memory", at
    6,400 by default) when one statement inserted thousands of runs: the locks are
    folded into 1,024 buckets, so a bulk load of any size commits and counts exactly."""
    backend = backend_of(empty)
    many = 20_000

    def load(conn: Session) -> None:
        conn.execute(
            sa.text(
                "INSERT INTO run_tool_calls (tenant, run_id, tool, calls, failures) "
                "SELECT :tenant, 'bulk-' || i, 'grep', 2, 1 FROM generate_series(1, :n) AS i"
                if backend.db.dialect == "postgresql"
                else "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s "
                "WHERE i < :n) INSERT INTO run_tool_calls (tenant, run_id, tool, calls, "
                "failures) SELECT :tenant, 'bulk-' || i, 'grep', 2, 1 FROM s"
            ),
            {"n": many, "tenant": TENANT},
        )

    await backend.db.write(load, what="test", atomic=True, retry=False)
    for n in (1, many):
        await client_of(empty).call(
            "runs", "create", {"run": run(f"bulk-{n}", "agent-1", startedAt=SINCE + n)}
        )
    indexed, _ = await counted(empty)
    assert [(row.tool, row.calls, row.failures) for row in indexed.tools] == [("grep", 4, 2)]
