"""The run list's "most tokens" and "longest" orders walk an index instead of sorting.

The run list across agents sorts a tenant's runs by ``COALESCE(total_tokens, -1)``
or ``COALESCE(duration_ms, -1)`` (-1: ``history.MISSING``, a run without the value
sorts last), then newest first. Without an index the database read and sorted every
run of the tenant for each page: over 1,000,000 runs about 250 ms on SQLite on a
quiet machine, seconds on a busy one. These two indexes hold the runs in that order
(tenant, the sort value, ``started_at``, ``agent_id``, ``run_id``: the keyset
cursor's columns), so a page reads its rows from the index's top, or from the
cursor's place (the query bounds the sort value by the cursor's, which both planners
turn into a range of the index). Filters (status, model, creator, since/until) are
checked on the rows as they are walked.

Each costs an entry per run, written with the run's summary (the run's create and
its updates that change a token count or its end).

``ix_runs_started`` gains ``total_tokens``, its last column: the cost order (whose
value depends on the price table of the moment, so no index holds it) tests it for
"no usage", and with it that order reads this index alone, never the runs'
documents, then the page's documents by key. Over 1,000,000 runs its last 30 days
took 190 ms on SQLite before, 61 ms after (same machine, same load).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 23:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Index name -> the summary column it orders by (as tables.RUN_SORT_INDEXES, which a
#: revision does not import: it stays what it was when the code moves on).
INDEXES = {"ix_runs_tokens": "total_tokens", "ix_runs_duration": "duration_ms"}


#: ix_runs_started's columns before this revision; it adds total_tokens at the end.
_STARTED = [
    "tenant",
    "started_at",
    "agent_id",
    "run_id",
    "model_id",
    "status",
    "duration_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
]


def upgrade() -> None:
    op.drop_index("ix_runs_started", table_name="runs")
    op.create_index("ix_runs_started", "runs", [*_STARTED, "total_tokens"])
    for name, column in INDEXES.items():
        op.create_index(
            name,
            "runs",
            [
                sa.column("tenant"),
                sa.text(f"COALESCE({column}, -1)"),
                sa.column("started_at"),
                sa.column("agent_id"),
                sa.column("run_id"),
            ],
        )


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="runs")
    op.drop_index("ix_runs_started", table_name="runs")
    op.create_index("ix_runs_started", "runs", _STARTED)
