"""Counting the tool calls events end, in the statements that store those events.

Revision 0006's ``run_tool_calls`` holds, per run and tool, the calls its events ended
and the failures among them (:func:`bridge_store.backend.statistics.tool_outcome`). An append
that ends a tool call counts it in the same transaction (SQLite: one more statement in
the writer's transaction; Postgres: one more data-modifying CTE in the append's single
statement, counted only when the event was stored, not for a repeated idempotency key),
so the counts can never disagree with the log. Every other append pays one call of
``tool_outcome`` (a few dict lookups) and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.statistics import tool_outcome
from bridge_store.types import Document

from .filters import one_of
from .tables import run_tool_calls as t

#: Adds calls and failures to a (tenant, run, tool) count.
ADD = sa.text(
    "INSERT INTO run_tool_calls AS c (tenant, run_id, tool, calls, failures) "
    "VALUES (:tenant, :run_id, :tool, :calls, :failures) "
    "ON CONFLICT (tenant, run_id, tool) DO UPDATE "
    "SET calls = c.calls + excluded.calls, failures = c.failures + excluded.failures"
)

#: Postgres: events.py's two append statements, each with one more CTE that counts the
#: tool call of the event it stored (``appended`` returns its seq, or nothing for a
#: repeated idempotency key). Kept in step with events.py by tests/test_overview.py.
APPEND_POSTGRES = sa.text(
    """
    WITH counter AS (
        INSERT INTO run_event_counters AS c (tenant, run_id, last_seq)
        VALUES (:tenant, :run_id, 1)
        ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = c.last_seq + 1
        RETURNING last_seq
    ), appended AS (
        INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
        SELECT :tenant, :run_id, last_seq, NULL, :doc FROM counter
        RETURNING seq
    ), counted AS (
        INSERT INTO run_tool_calls AS t (tenant, run_id, tool, calls, failures)
        SELECT :tenant, :run_id, :tool, 1, :failed FROM appended
        ON CONFLICT (tenant, run_id, tool) DO UPDATE
        SET calls = t.calls + 1, failures = t.failures + excluded.failures
    )
    SELECT seq FROM appended
    """
).columns(seq=sa.BigInteger())

APPEND_WITH_KEY_POSTGRES = sa.text(
    """
    WITH existing AS (
        SELECT seq, doc FROM run_events
        WHERE tenant = :tenant AND run_id = :run_id AND idempotency_key = :key
    ), counter AS (
        INSERT INTO run_event_counters AS c (tenant, run_id, last_seq)
        SELECT :tenant, :run_id, 1 WHERE NOT EXISTS (SELECT FROM existing)
        ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = c.last_seq + 1
        RETURNING last_seq
    ), appended AS (
        INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
        SELECT :tenant, :run_id, last_seq, :key, :doc FROM counter
        RETURNING seq
    ), counted AS (
        INSERT INTO run_tool_calls AS t (tenant, run_id, tool, calls, failures)
        SELECT :tenant, :run_id, :tool, 1, :failed FROM appended
        ON CONFLICT (tenant, run_id, tool) DO UPDATE
        SET calls = t.calls + 1, failures = t.failures + excluded.failures
    )
    SELECT seq, NULL AS doc FROM appended
    UNION ALL
    SELECT seq, doc FROM existing
    """
).columns(seq=sa.BigInteger(), doc=sa.Text())


def added(tenant: str, events: Sequence[Document]) -> list[dict[str, Any]]:
    """The counts these events of one run add, as parameters of :data:`ADD`."""
    calls: Counter[tuple[str, str]] = Counter()
    failures: Counter[tuple[str, str]] = Counter()
    for event in events:
        outcome = tool_outcome(event)
        if outcome is not None:
            key = (event["runId"], outcome[0])
            calls[key] += 1
            failures[key] += outcome[1]
    rows = []
    for (run_id, tool), n in calls.items():
        failed = failures[(run_id, tool)]
        rows.append(
            {"tenant": tenant, "run_id": run_id, "tool": tool, "calls": n, "failures": failed}
        )
    return rows


def of_runs(tenant: str, run_ids: Sequence[str] | None) -> sa.Delete:
    """Deletes the counts of these runs (None: every run of the tenant)."""
    statement = sa.delete(t).where(t.c.tenant == tenant)
    return statement if run_ids is None else statement.where(one_of(t.c.run_id, run_ids))
