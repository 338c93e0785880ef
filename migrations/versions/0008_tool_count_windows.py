"""Tool counts know their run's time and model: the top tools are one index range.

Revision 0006's ``run_tool_calls`` was joined to ``runs`` for each run's day and model,
a lookup per run over 100,000 runs (most of the overview's time on SQLite). Its rows
now also hold their run's ``started_at``, ``day`` (``started_at`` // a day's
milliseconds) and ``model_id``, and the index ``ix_run_tool_calls_day`` (tenant, day,
model_id, tool, started_at, calls, failures) holds them in the overview's group order
with everything it sums: the count is one range of one index, grouped as it is read.

The database keeps the copies current itself, whoever writes, so no backend statement
changes: a new count row reads its run's values (on Postgres with the run's row share
locked, so a concurrent update of the run waits for the count's commit and then
updates it too); creating, updating (only when ``started_at`` or ``model_id``
changes) and deleting a run rewrite its count rows (deleting: NULL, which is outside
every range, as the join left a count without its run out). A count whose run does
not exist yet holds NULL until the run is created. Rows from before are filled here
in one statement.

A later revision that rebuilds ``runs`` or ``run_tool_calls`` on SQLite (batch mode
copies the table) drops these triggers with it and must create them again; the SQLite
ones look a run up ``INDEXED BY ix_runs_run_order``, which must then stay.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 19:30:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bridge_store.backend.statistics import DAY_MS

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_run_tool_calls_day"
#: The index's columns: the overview's group order, then what it sums.
DAY_COLUMNS = ("tenant", "day", "model_id", "tool", "started_at", "calls", "failures")


def _columns() -> list[sa.Column[object]]:
    label = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
    return [
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("day", sa.BigInteger(), nullable=True),
        sa.Column("model_id", label, nullable=True),
    ]


def _of_run(run: str) -> str:
    """The (started_at, day, model_id) of the count rows of the run ``run`` (NEW/OLD)."""
    return (
        f"UPDATE run_tool_calls SET started_at = {run}.started_at, "
        f"day = {run}.started_at / {DAY_MS}, model_id = {run}.model_id "
        f"WHERE tenant = {run}.tenant AND run_id = {run}.run_id"
    )


_FORGET = (
    "UPDATE run_tool_calls SET started_at = NULL, day = NULL, model_id = NULL "
    "WHERE tenant = OLD.tenant AND run_id = OLD.run_id"
)
_CHANGED = "OLD.started_at IS NOT NEW.started_at OR OLD.model_id IS NOT NEW.model_id"

#: Every count row from before: its run's values (NULL without one). SQLite: one lookup
#: per count row (INDEXED BY: see the trigger below); Postgres: one join.
_SQLITE_BACKFILL = (
    "UPDATE run_tool_calls SET (started_at, day, model_id) = ("
    f"SELECT r.started_at, r.started_at / {DAY_MS}, r.model_id "
    "FROM runs AS r INDEXED BY ix_runs_run_order "
    "WHERE r.tenant = run_tool_calls.tenant AND r.run_id = run_tool_calls.run_id LIMIT 1)"
)
_POSTGRES_BACKFILL = (
    f"UPDATE run_tool_calls AS c SET started_at = r.started_at, day = r.started_at / {DAY_MS}, "
    "model_id = r.model_id FROM runs AS r WHERE r.tenant = c.tenant AND r.run_id = c.run_id"
)

_SQLITE_UPGRADE = [
    # A new count row (an upsert that only adds to one is an UPDATE, which keeps them).
    # INDEXED BY: without statistics SQLite would pick the covering ix_runs_started and
    # read every run of the tenant (tenant=? only) for each new count row.
    "CREATE TRIGGER run_tool_calls_window AFTER INSERT ON run_tool_calls BEGIN "
    "UPDATE run_tool_calls SET (started_at, day, model_id) = ("
    f"SELECT r.started_at, r.started_at / {DAY_MS}, r.model_id "
    "FROM runs AS r INDEXED BY ix_runs_run_order "
    "WHERE r.tenant = NEW.tenant AND r.run_id = NEW.run_id LIMIT 1) "
    "WHERE tenant = NEW.tenant AND run_id = NEW.run_id AND tool = NEW.tool; END",
    f"CREATE TRIGGER runs_tool_calls_created AFTER INSERT ON runs BEGIN {_of_run('NEW')}; END",
    "CREATE TRIGGER runs_tool_calls_updated AFTER UPDATE OF started_at, model_id ON runs "
    f"WHEN {_CHANGED} BEGIN {_of_run('NEW')}; END",
    f"CREATE TRIGGER runs_tool_calls_deleted AFTER DELETE ON runs BEGIN {_FORGET}; END",
]
_SQLITE_DOWNGRADE = [
    f"DROP TRIGGER {name}"
    for name in (
        "runs_tool_calls_deleted",
        "runs_tool_calls_updated",
        "runs_tool_calls_created",
        "run_tool_calls_window",
    )
]

_POSTGRES_UPGRADE = [
    # FOR SHARE: a concurrent update of the run waits for this row's commit (then its
    # trigger rewrites it), or this waits for that update's and reads its values.
    "CREATE FUNCTION bridge_store_tool_calls_window() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    "SELECT r.started_at, r.started_at / "
    f"{DAY_MS}, r.model_id INTO NEW.started_at, NEW.day, NEW.model_id "
    "FROM runs AS r WHERE r.tenant = NEW.tenant AND r.run_id = NEW.run_id "
    "LIMIT 1 FOR SHARE; RETURN NEW; END $$",
    "CREATE FUNCTION bridge_store_runs_tool_calls() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP = 'DELETE' THEN {_FORGET}; RETURN OLD; END IF; "
    f"{_of_run('NEW')}; RETURN NEW; END $$",
    "CREATE TRIGGER run_tool_calls_window BEFORE INSERT ON run_tool_calls "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_tool_calls_window()",
    "CREATE TRIGGER runs_tool_calls_created AFTER INSERT ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_runs_tool_calls()",
    "CREATE TRIGGER runs_tool_calls_deleted AFTER DELETE ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_runs_tool_calls()",
    "CREATE TRIGGER runs_tool_calls_updated AFTER UPDATE OF started_at, model_id ON runs "
    f"FOR EACH ROW WHEN ({_CHANGED.replace('IS NOT', 'IS DISTINCT FROM')}) "
    "EXECUTE FUNCTION bridge_store_runs_tool_calls()",
]
_POSTGRES_DOWNGRADE = [
    "DROP TRIGGER runs_tool_calls_deleted ON runs",
    "DROP TRIGGER runs_tool_calls_updated ON runs",
    "DROP TRIGGER runs_tool_calls_created ON runs",
    "DROP TRIGGER run_tool_calls_window ON run_tool_calls",
    "DROP FUNCTION bridge_store_runs_tool_calls()",
    "DROP FUNCTION bridge_store_tool_calls_window()",
]


def _run(statements: list[str]) -> None:
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for column in _columns():
        op.add_column("run_tool_calls", column)
    _run([_SQLITE_BACKFILL if sqlite else _POSTGRES_BACKFILL])
    op.create_index(_INDEX, "run_tool_calls", list(DAY_COLUMNS))
    _run(_SQLITE_UPGRADE if sqlite else _POSTGRES_UPGRADE)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _run(_SQLITE_DOWNGRADE if sqlite else _POSTGRES_DOWNGRADE)
    op.drop_index(_INDEX, table_name="run_tool_calls")
    for column in reversed(_columns()):
        op.drop_column("run_tool_calls", column.name)
