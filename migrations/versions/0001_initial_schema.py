"""Initial schema: agents, runs, run events with their counters, checkpoint blobs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.types.TypeEngine[str]:
    # Byte-wise order on every dialect (SQLite's BINARY is the default there).
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("agent_id", _id(), primary_key=True),
        sa.Column("cwd", _id(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("doc", sa.Text(), nullable=False),
    )
    op.create_index("ix_agents_order", "agents", ["updated_at", "agent_id"])
    op.create_index("ix_agents_cwd_order", "agents", ["cwd", "updated_at", "agent_id"])

    op.create_table(
        "runs",
        sa.Column("agent_id", _id(), primary_key=True),
        sa.Column("run_id", _id(), primary_key=True),
        sa.Column("turn_number", sa.BigInteger(), nullable=False),
        sa.Column("doc", sa.Text(), nullable=False),
    )
    op.create_index("ix_runs_order", "runs", ["turn_number", "run_id", "agent_id"])
    op.create_index("ix_runs_agent_order", "runs", ["agent_id", "turn_number", "run_id"])
    op.create_index("ix_runs_run_order", "runs", ["run_id", "turn_number", "agent_id"])

    op.create_table(
        "run_event_counters",
        sa.Column("run_id", _id(), primary_key=True),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
    )

    op.create_table(
        "run_events",
        sa.Column("run_id", _id(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("idempotency_key", _id(), nullable=True),
        sa.Column("doc", sa.Text(), nullable=False),
        sa.UniqueConstraint("run_id", "idempotency_key", name="uq_run_events_idempotency_key"),
    )

    op.create_table(
        "checkpoint_blobs",
        sa.Column("agent_id", _id(), primary_key=True),
        sa.Column("blob_id", _id(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_checkpoint_blobs_order", "checkpoint_blobs", ["blob_id", "agent_id"])
    if op.get_bind().dialect.name == "postgresql":
        # Blobs are encrypted conversation state: compressing them only burns CPU.
        # EXTERNAL keeps them out of line (TOAST) without trying pglz first.
        op.execute("ALTER TABLE checkpoint_blobs ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("checkpoint_blobs")
    op.drop_table("run_events")
    op.drop_table("run_event_counters")
    op.drop_table("runs")
    op.drop_table("agents")
