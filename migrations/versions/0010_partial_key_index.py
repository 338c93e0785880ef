"""Postgres: idempotency keys are unique through a partial index, so a list never reads it.

``uq_run_events_idempotency_key`` was a UNIQUE constraint on (tenant, run_id,
idempotency_key), an index whose first two columns are the primary key's. Until a
table is analyzed (a new store; a server whose autovacuum is off) Postgres estimates
one row for any run and costs an index by its height. The key index held an entry
per event, the bridge's NULL keys deduplicated, so it stayed a level shallower than
the primary key, and for the list's ``WHERE tenant = ... AND run_id = ... AND seq >
... ORDER BY seq LIMIT ...`` Postgres often took it: it read every event of the run,
dropped those at or before the cursor with a filter and sorted the rest, so a poll
of a long run read all of it. Under ``bench load`` on a fresh store every session's
first plans took the key index and half the sessions kept it, the index's reads
growing with each run's length (docs/sql.md has the figures).

The uniqueness now lives in a unique index over the rows that have a key. Nothing
changes for what is stored or refused: NULL keys never conflicted, and two events
with one key still cannot both be inserted. The key lookups (``idempotency_key =
...``) imply the index's predicate and use it; the list cannot, so the primary key
is its only index.

SQLite is left as it is: its constraint is part of the table, which only a rebuild
could change, and SQLite's planner takes the primary key for the list regardless
(``tests/test_sql_sqlite.py`` checks its plans). The way down puts the constraint back.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 06:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME = "uq_run_events_idempotency_key"
_COLUMNS = ["tenant", "run_id", "idempotency_key"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # One transaction: no moment exists in which two events could share a key.
        op.drop_constraint(_NAME, "run_events", type_="unique")
        op.create_index(
            _NAME,
            "run_events",
            _COLUMNS,
            unique=True,
            postgresql_where="idempotency_key IS NOT NULL",
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(_NAME, table_name="run_events")
        op.create_unique_constraint(_NAME, "run_events", _COLUMNS)
