"""The export queue: runs ``serve --export-runs`` has yet to send to the collector.

One row per ended run waiting (every tenant's in one table, keyed by tenant, agent and
run), with the time it was queued; the exporter reads the oldest first through
``ix_run_export_queue_order`` and deletes the rows it sent. A new, empty table: no
existing row is read or changed, and the way down drops it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "run_export_queue",
        sa.Column("tenant", _id(), primary_key=True),
        sa.Column("agent_id", _id(), primary_key=True),
        sa.Column("run_id", _id(), primary_key=True),
        sa.Column("queued_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index(
        "ix_run_export_queue_order",
        "run_export_queue",
        ["queued_ms", "tenant", "agent_id", "run_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_run_export_queue_order", table_name="run_export_queue")
    op.drop_table("run_export_queue")
