"""Run summaries: what the history's run list and overview read, beside each run's doc.

Columns of ``runs`` (``bridge_store_sql.summary``): ``started_at`` (the run's start, or
its creation; 0 when it has neither), ``status``, ``model_id``, ``duration_ms`` and the
token counts of its usage, all from ``bridge_store.backend.history.summarize_run``; and the
index ``ix_runs_started`` (tenant, started_at, agent_id, run_id, then the summary
columns the overview reads, so its statements read the index alone) that lists a
tenant's runs newest first and bounds the overview's days.

The backend writes them with every create and update. Rows from before are filled
here by the same function (the one definition of a run's summary), a batch of
:data:`BATCH` rows at a time in primary-key order, so the migration's memory stays
bounded whatever the store holds. Adding the columns changes no existing row (nullable,
or a constant default), so revision 0003's SQLite triggers stay as they are.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from bridge_store.wire import jsontext
from bridge_store_sql.summary import SUMMARY_COLUMNS, summary_columns
from bridge_store_sql.tables import RUNS_STARTED_COLUMNS

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Rows read, summarized and written back per step of the backfill.
BATCH = 1000


def _label() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("started_at", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("status", _label(), nullable=True),
        sa.Column("model_id", _label(), nullable=True),
        *(
            sa.Column(name, sa.BigInteger(), nullable=True)
            for name in SUMMARY_COLUMNS
            if name not in ("started_at", "status", "model_id")
        ),
    ]


_PAGE = sa.text(
    "SELECT tenant, agent_id, run_id, doc FROM runs "
    "WHERE (tenant, agent_id, run_id) > (:tenant, :agent_id, :run_id) "
    "ORDER BY tenant, agent_id, run_id LIMIT :limit"
)
_WRITE = sa.text(
    "UPDATE runs SET "  # noqa: S608 - the column names are this module's constants
    + ", ".join(f"{name} = :{name}" for name in SUMMARY_COLUMNS)
    + " WHERE tenant = :tenant AND agent_id = :agent_id AND run_id = :run_id"
)


def backfill(connection: sa.Connection) -> int:
    """Fill every row's summary, a batch at a time; how many rows."""
    after = {"tenant": "", "agent_id": "", "run_id": ""}
    done = 0
    while True:
        rows = connection.execute(_PAGE, {**after, "limit": BATCH}).all()
        if not rows:
            return done
        connection.execute(
            _WRITE,
            [
                {
                    "tenant": tenant,
                    "agent_id": agent_id,
                    "run_id": run_id,
                    **summary_columns(jsontext.loads_document(doc)),
                }
                for tenant, agent_id, run_id, doc in rows
            ],
        )
        done += len(rows)
        tenant, agent_id, run_id, _ = rows[-1]
        after = {"tenant": tenant, "agent_id": agent_id, "run_id": run_id}


def upgrade() -> None:
    for column in _columns():
        op.add_column("runs", column)
    backfill(op.get_bind())
    op.create_index("ix_runs_started", "runs", list(RUNS_STARTED_COLUMNS))


def downgrade() -> None:
    op.drop_index("ix_runs_started", table_name="runs")
    for column in reversed(_columns()):
        op.drop_column("runs", column.name)
