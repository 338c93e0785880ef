"""Tool counts: per run and tool, the calls its events ended and how many failed.

The table ``run_tool_calls`` (tenant, run_id, tool) -> calls, failures, which the
overview joins to revision 0005's run summaries to rank tools by calls and failures
per day and model. The backend counts each appended (or restored) event that ends a
tool call (``bridge_store.backend.statistics.tool_outcome``) in the statement that stores it,
and drops a run's counts with its events.

Events from before are counted here by the same function, :data:`BATCH` events at a
time in primary-key order, reading only events whose text mentions ``tool_call``
(the database skips the others, which cannot end one), so memory stays bounded
whatever the store holds.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bridge_store.backend.statistics import tool_outcome
from bridge_store.wire import jsontext

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Events read and counted per step of the backfill.
BATCH = 1000


def _id() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


_PAGE = sa.text(
    "SELECT tenant, run_id, seq, doc FROM run_events "
    "WHERE (tenant, run_id, seq) > (:tenant, :run_id, :seq) AND doc LIKE '%tool_call%' "
    "ORDER BY tenant, run_id, seq LIMIT :limit"
)
_ADD = sa.text(
    "INSERT INTO run_tool_calls AS c (tenant, run_id, tool, calls, failures) "
    "VALUES (:tenant, :run_id, :tool, :calls, :failures) "
    "ON CONFLICT (tenant, run_id, tool) DO UPDATE "
    "SET calls = c.calls + excluded.calls, failures = c.failures + excluded.failures"
)


def backfill(connection: sa.Connection) -> int:
    """Count every stored event that ends a tool call, a batch at a time; how many."""
    after = {"tenant": "", "run_id": "", "seq": 0}
    counted = 0
    while True:
        rows = connection.execute(_PAGE, {**after, "limit": BATCH}).all()
        if not rows:
            return counted
        calls: Counter[tuple[str, str, str]] = Counter()
        failures: Counter[tuple[str, str, str]] = Counter()
        for tenant, run_id, _, doc in rows:
            outcome = tool_outcome(jsontext.loads_document(doc))
            if outcome is not None:
                key = (tenant, run_id, outcome[0])
                calls[key] += 1
                failures[key] += outcome[1]
        if calls:
            connection.execute(
                _ADD,
                [
                    {
                        "tenant": tenant,
                        "run_id": run_id,
                        "tool": tool,
                        "calls": n,
                        "failures": failures[(tenant, run_id, tool)],
                    }
                    for (tenant, run_id, tool), n in calls.items()
                ],
            )
            counted += sum(calls.values())
        tenant, run_id, seq, _ = rows[-1]
        after = {"tenant": tenant, "run_id": run_id, "seq": seq}


def upgrade() -> None:
    op.create_table(
        "run_tool_calls",
        sa.Column("tenant", _id(), primary_key=True),
        sa.Column("run_id", _id(), primary_key=True),
        sa.Column("tool", _id(), primary_key=True),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.BigInteger(), nullable=False),
        sqlite_with_rowid=False,
    )
    backfill(op.get_bind())


def downgrade() -> None:
    op.drop_table("run_tool_calls")
