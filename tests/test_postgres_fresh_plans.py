"""A poll of a run's events is a primary-key range scan on a store never analyzed.

A new store, or a server whose autovacuum is off, has no statistics: Postgres then
guesses one row for any run, and before revision 0010 it often answered the list with
the idempotency-key index (whose first columns are the primary key's), read the whole
run, filtered out what lay before the cursor and sorted the rest. Both the plans a
session makes for the statement's first executions (custom) and the one it keeps
after them (generic) are checked, with the text the asyncpg driver sends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from bridge_store_sql import events
from testkit.services import run_async

pytestmark = pytest.mark.postgres

RUNS = 16
EVENTS_PER_RUN = 50
# The bridge's events carry no idempotency key (a few clients' do). Before 0010 the
# key index held an entry per event, the NULL ones deduplicated: at 800 events it
# was 2 pages against the primary key's 11, a tree one level shallower, and so the
# cheaper guess.
KEYED_EVERY = 50


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def list_plans(url: str) -> dict[str, dict[str, Any]]:
    """The list statement's plan, per ``plan_cache_mode``, on an unanalyzed table."""
    statement = events.list_query("default", "run-00", after_seq=3, limit=101).compile(
        dialect=PGDialect_asyncpg()  # type: ignore[no-untyped-call]
    )

    async def work() -> dict[str, dict[str, Any]]:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(
                """INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
                SELECT 'default', 'run-' || lpad((i % $1::int)::text, 2, '0'), i,
                       CASE WHEN i % $3::int = 0 THEN 'key-' || i END,
                       '{"payload": {"type": "status", "status": "running"}}'
                FROM generate_series(1, $1::int * $2::int) AS i""",
                RUNS,
                EVENTS_PER_RUN,
                KEYED_EVERY,
            )
            plans = {}
            for mode in ("force_custom_plan", "force_generic_plan"):
                await connection.execute(f"SET plan_cache_mode = {mode}")
                await connection.execute(f"PREPARE poll AS {statement}")
                (text,) = await connection.fetchrow(
                    "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE poll('default', 'run-00', 3, 101)"
                )
                await connection.execute("DEALLOCATE poll")
                plans[mode] = json.loads(text)[0]["Plan"]
            return plans
        finally:
            await connection.close()

    return run_async(work)


def test_a_poll_reads_the_primary_key_before_any_analyze(
    make_migrated_postgres_url: Callable[[], str],
) -> None:
    for mode, plan in list_plans(make_migrated_postgres_url()).items():
        kinds = [node["Node Type"] for node in nodes(plan)]
        scans = [node.get("Index Name") for node in nodes(plan) if "Scan" in node["Node Type"]]
        assert scans == ["run_events_pkey"], (mode, kinds, scans)
        assert "Sort" not in kinds, (mode, kinds)
        assert all(node.get("Rows Removed by Filter", 0) == 0 for node in nodes(plan)), mode
        # Every event of run-00 (seq 16, 32, ...) lies after the cursor at 3.
        assert plan["Actual Rows"] == EVENTS_PER_RUN, mode
