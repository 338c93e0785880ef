"""Every list is an index range scan that reads one page, at 100k agents, 100k runs,
100k checkpoint blobs and 1M events in one run.

The statements are the ones the backend sends (its query builders), run under
``EXPLAIN ANALYZE`` against a freshly populated and analyzed database. A page must come
straight off an index in list order: no sort, no sequential scan, and no row read and
then thrown away by a filter, however deep the cursor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql.base import PGDialect

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import AgentPosition, BlobRef, RunPosition
from bridge_store_sql import agents, checkpoints, events, runs
from testkit.services import fetch, run_async

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

AGENTS = 100_000
RUNS = 100_000
BLOBS = 100_000
EVENTS = 1_000_000
PAGE = 51  # the contract layer asks for limit + 1 rows


@pytest.fixture(scope="module")
def populated(make_migrated_postgres_url: Callable[[], str]) -> str:
    url = make_migrated_postgres_url()

    async def populate() -> None:
        backend = open_backend(get_plugin_manager(), url)
        await backend.start(migrate=True)
        await backend.close()
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(
                """INSERT INTO agents (tenant, agent_id, cwd, updated_at, doc)
                SELECT 'default', 'agent-' || lpad(i::text, 6, '0'), '/work/' || (i % 100),
                       i / 2, '{}'
                FROM generate_series(1, $1::int) AS i""",
                AGENTS,
            )
            # Half the runs and blobs belong to one agent: listing it must not read them all.
            await connection.execute(
                """INSERT INTO runs (tenant, agent_id, run_id, turn_number, doc)
                SELECT 'default', CASE WHEN i <= $1::int / 2 THEN 'agent-heavy'
                            ELSE 'agent-' || lpad((i % 1000)::text, 6, '0') END,
                       'run-' || lpad(i::text, 6, '0'), i % 100, '{}'
                FROM generate_series(1, $1::int) AS i""",
                RUNS,
            )
            await connection.execute(
                """INSERT INTO checkpoint_blobs (tenant, agent_id, blob_id, data)
                SELECT 'default', CASE WHEN i <= $1::int / 2 THEN 'agent-heavy'
                            ELSE 'agent-' || lpad((i % 1000)::text, 6, '0') END,
                       md5(i::text), ''::bytea
                FROM generate_series(1, $1::int) AS i""",
                BLOBS,
            )
            await connection.execute(
                """INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
                SELECT 'default', 'big', i, CASE WHEN i % 2 = 0 THEN 'key-' || i END, '{}'
                FROM generate_series(1, $1::int) AS i""",
                EVENTS,
            )
            await connection.execute(
                "INSERT INTO run_event_counters (tenant, run_id, last_seq) "
                "VALUES ('default', 'big', $1)",
                EVENTS,
            )
            await connection.execute("ANALYZE")
        finally:
            await connection.close()

    run_async(populate)
    return url


def plan_of(url: str, query: sa.Select[Any]) -> dict[str, Any]:
    dialect = PGDialect()  # type: ignore[no-untyped-call]
    sql = query.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    ((text,),) = fetch(url, f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return plan


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def assert_one_page_off_an_index(plan: dict[str, Any], limit: int) -> None:
    """No node handles more than a page of rows, and none reads rows to drop them.

    That bounds the work by the page size wherever the cursor is. (A sort of at most
    a page of rows is allowed: the planner picks one when few rows follow the cursor.)
    """
    kinds = [node["Node Type"] for node in nodes(plan)]
    assert plan["Node Type"] == "Limit", kinds
    assert "Seq Scan" not in kinds, kinds
    for node in nodes(plan):
        assert node["Actual Rows"] <= limit, node
        assert node.get("Rows Removed by Filter", 0) == 0, node
        assert node.get("Rows Removed by Index Recheck", 0) == 0, node


DEEP_AGENT = AgentPosition(updated_at=AGENTS // 4, agent_id="agent-050000")
DEEP_RUN = RunPosition(turn_number=50, run_id="run-050050", agent_id="agent-000050")


@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("agents first page", agents.list_query("default", cwd=None, after=None, limit=PAGE)),
        ("agents deep", agents.list_query("default", cwd=None, after=DEEP_AGENT, limit=PAGE)),
        (
            "agents of a cwd",
            agents.list_query("default", cwd="/work/7", after=DEEP_AGENT, limit=PAGE),
        ),
        (
            "runs first page",
            runs.list_query("default", agent_ids=None, run_ids=None, after=None, limit=PAGE),
        ),
        (
            "runs deep",
            runs.list_query("default", agent_ids=None, run_ids=None, after=DEEP_RUN, limit=PAGE),
        ),
        (
            "runs of an agent",
            runs.list_query(
                "default",
                agent_ids=["agent-heavy"],
                run_ids=None,
                after=RunPosition(50, "run-025050", "agent-heavy"),
                limit=PAGE,
            ),
        ),
        (
            # A cursor from an unfiltered listing: the pinned agent sorts after its agent.
            "runs of an agent, cursor from another agent",
            runs.list_query(
                "default", agent_ids=["agent-heavy"], run_ids=None, after=DEEP_RUN, limit=PAGE
            ),
        ),
        (
            "runs of an agent, cursor from a later agent",
            runs.list_query(
                "default",
                agent_ids=["agent-heavy"],
                run_ids=None,
                after=RunPosition(50, "run-025050", "agent-zzz"),
                limit=PAGE,
            ),
        ),
        (
            "runs by run id",
            runs.list_query(
                "default", agent_ids=None, run_ids=["run-050050"], after=DEEP_RUN, limit=PAGE
            ),
        ),
        ("events from the start", events.list_query("default", "big", after_seq=0, limit=101)),
        ("events deep", events.list_query("default", "big", after_seq=EVENTS // 2, limit=101)),
        (
            "checkpoints deep",
            checkpoints.list_query(
                "default",
                agent_ids=None,
                blob_ids=None,
                after=BlobRef("8", "agent-000001"),
                limit=PAGE,
            ),
        ),
        (
            "checkpoints of an agent",
            checkpoints.list_query(
                "default",
                agent_ids=["agent-heavy"],
                blob_ids=None,
                after=BlobRef("8", "agent-000001"),
                limit=PAGE,
            ),
        ),
    ],
)
def test_list_reads_one_page_off_an_index(populated: str, name: str, query: sa.Select[Any]) -> None:
    assert_one_page_off_an_index(plan_of(populated, query), 101 if "events" in name else PAGE)


def test_idempotency_key_lookup_is_an_index_probe(populated: str) -> None:
    plan = plan_of(populated, events.by_key_query("default", "big", "key-500000"))
    assert [node["Node Type"] for node in nodes(plan)] == ["Index Scan"]
    assert plan["Actual Rows"] == 1
