"""Tenants: a tenant column first in every table's key and indexes.

Existing rows become tenant ``default``, which is where a store written before
tenants existed keeps its data. The column gets no default afterwards: every write
names its tenant.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Each table's key before this revision, and its indexes (name: columns after tenant).
_TABLES: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "agents": (
        ["agent_id"],
        {
            "ix_agents_order": ["updated_at", "agent_id"],
            "ix_agents_cwd_order": ["cwd", "updated_at", "agent_id"],
        },
    ),
    "runs": (
        ["agent_id", "run_id"],
        {
            "ix_runs_order": ["turn_number", "run_id", "agent_id"],
            "ix_runs_agent_order": ["agent_id", "turn_number", "run_id"],
            "ix_runs_run_order": ["run_id", "turn_number", "agent_id"],
        },
    ),
    "run_event_counters": (["run_id"], {}),
    "run_events": (["run_id", "seq"], {}),
    "checkpoint_blobs": (
        ["agent_id", "blob_id"],
        {"ix_checkpoint_blobs_order": ["blob_id", "agent_id"]},
    ),
}
_IDEMPOTENCY = "uq_run_events_idempotency_key"


def _id() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _columns(table: str) -> list[sa.Column[Any]]:
    """The table's columns as of revision 0001, none of them in a key."""
    ids = {"agent_id", "run_id", "blob_id", "cwd"}
    types: dict[str, sa.types.TypeEngine[Any]] = {
        "updated_at": sa.BigInteger(),
        "turn_number": sa.BigInteger(),
        "last_seq": sa.BigInteger(),
        "seq": sa.BigInteger(),
        "doc": sa.Text(),
        "data": sa.LargeBinary(),
    }
    names = {
        "agents": ["agent_id", "cwd", "updated_at", "doc"],
        "runs": ["agent_id", "run_id", "turn_number", "doc"],
        "run_event_counters": ["run_id", "last_seq"],
        "run_events": ["run_id", "seq", "idempotency_key", "doc"],
        "checkpoint_blobs": ["agent_id", "blob_id", "data"],
    }[table]
    return [
        sa.Column(
            name,
            _id() if name in ids or name == "idempotency_key" else types[name],
            nullable=name == "idempotency_key",
        )
        for name in names
    ]


def _sqlite_copy(table: str) -> sa.Table:
    """What batch mode copies an SQLite table from: its columns, tenant first, and no
    key, so the new primary key is the only one (reflection would carry the old one
    over and conflict with it)."""
    tenant = sa.Column("tenant", _id(), nullable=False)
    return sa.Table(table, sa.MetaData(), tenant, *_columns(table))


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, (key, indexes) in _TABLES.items():
        for name in indexes:
            op.drop_index(name, table_name=table)
        # Both dialects add a NOT NULL column with a default in place (no rewrite of
        # the rows on Postgres 11+); the default fills the existing rows.
        op.add_column(table, sa.Column("tenant", _id(), nullable=False, server_default="default"))
        # SQLite cannot change a primary key in place: batch mode copies the table into
        # a new one with the new key. Postgres alters it where it is.
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "never",
            copy_from=_sqlite_copy(table) if sqlite else None,
        ) as batch:
            if not sqlite:
                batch.drop_constraint(f"{table}_pkey", type_="primary")
            batch.create_primary_key(f"{table}_pkey", ["tenant", *key])
            if table == "run_events":
                if not sqlite:  # the copy has no constraints to drop
                    batch.drop_constraint(_IDEMPOTENCY, type_="unique")
                batch.create_unique_constraint(
                    _IDEMPOTENCY, ["tenant", "run_id", "idempotency_key"]
                )
            batch.alter_column("tenant", existing_type=_id(), server_default=None)
        for name, columns in indexes.items():
            op.create_index(name, table, ["tenant", *columns])


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, (key, indexes) in _TABLES.items():
        # Only tenant default's rows fit the old keys.
        op.execute(sa.text(f"DELETE FROM {table} WHERE tenant <> 'default'"))  # noqa: S608
        for name in indexes:
            op.drop_index(name, table_name=table)
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "never",
            copy_from=_sqlite_copy(table) if sqlite else None,
        ) as batch:
            if table == "run_events":
                if not sqlite:
                    batch.drop_constraint(_IDEMPOTENCY, type_="unique")
                batch.create_unique_constraint(_IDEMPOTENCY, ["run_id", "idempotency_key"])
            if not sqlite:
                batch.drop_constraint(f"{table}_pkey", type_="primary")
            batch.create_primary_key(f"{table}_pkey", key)
            batch.drop_column("tenant")
        for name, columns in indexes.items():
            op.create_index(name, table, columns)
