"""Per-day sums of runs by model and creator, and by model and agent: who spent what.

The overview breaks a tenant's runs, failures and tokens down by day, model, creator
and agent, over a window and the one before it, and prices the tokens when it shows
them (never stored, so a new price re-prices everything). Summing ``runs`` for that
reads every run of both windows; these two tables hold the sums per UTC day already:

- ``run_days`` (tenant, day, model_key, creator_key): runs, failed (status
  ``error``), and the four token sums. ``model_key`` is the run's ``model_id`` and
  ``creator_key`` its ``created_by``, '' for none (a key column cannot be NULL);
- ``run_agent_days`` (tenant, day, agent_id, model_key): the same per agent.

A day is ``started_at`` // a day's milliseconds, rounded down for a time before 1970
too (as Python's ``//``, so the SQL and the scan count a run on the same day). Token
sums are NUMERIC on Postgres (a bigint sum of counts near 2^53 would overflow and fail
the run's write); SQLite turns an integer past 2^63 into a float instead.

The database keeps them current, whoever writes, with triggers on ``runs``: an insert
adds the run to its two rows (an upsert), a delete takes it away (and drops a row left
with no run), an update that keeps the run's keys (day, model, creator) adds the
difference of its status and tokens, and one that moves it takes it from its old rows
and adds it to its new ones. Each is exact under concurrent writers: an upsert and an
update of one row wait on its row lock. On Postgres an update that moves a run touches
its two rows of each table in key order, so two such updates never wait on each other
in a cycle. Rows from before are summed here, with the runs table locked against
writes on Postgres so a server still on the old code waits rather than writing between
the sums and the triggers.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 09:00:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bridge_store.backend.statistics import DAY_MS

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_SUMS = ("runs", "failed", *_TOKENS)
#: Each table and the key columns after ``tenant``, with the run's value for each.
_TABLES = {
    "run_days": ("day", "model_key", "creator_key"),
    "run_agent_days": ("day", "agent_id", "model_key"),
}


def _day(run: str) -> str:
    return (
        f"(CASE WHEN {run}.started_at >= 0 THEN {run}.started_at / {DAY_MS} "
        f"ELSE -((-{run}.started_at - 1) / {DAY_MS}) - 1 END)"
    )


def _key(run: str, column: str) -> str:
    return {
        "day": _day(run),
        "model_key": f"COALESCE({run}.model_id, '')",
        "creator_key": f"COALESCE({run}.created_by, '')",
        "agent_id": f"{run}.agent_id",
    }[column]


def _value(run: str, column: str) -> str:
    if column == "runs":
        return "1"
    if column == "failed":
        return f"(CASE WHEN {run}.status = 'error' THEN 1 ELSE 0 END)"
    return f"COALESCE({run}.{column}, 0)"


def _where(table: str, run: str) -> str:
    keys = ("tenant", *_TABLES[table])
    return " AND ".join(
        f"{column} = {run}.tenant" if column == "tenant" else f"{column} = {_key(run, column)}"
        for column in keys
    )


def _add(table: str, run: str, source: str = "") -> str:
    """Adds the run ``run`` (NEW, or each row of ``source``) to its row of ``table``."""
    keys = ("tenant", *_TABLES[table])
    values = [f"{run}.tenant", *(_key(run, c) for c in _TABLES[table])]
    values += [_value(run, c) for c in _SUMS]
    head = f"INSERT INTO {table} ({', '.join((*keys, *_SUMS))}) "
    body = (
        f"VALUES ({', '.join(values)})"
        if not source
        else (f"SELECT {', '.join(values)} FROM {source} WHERE true")
    )
    updates = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in _SUMS)
    return f"{head}{body} ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"


def _take(table: str, run: str) -> list[str]:
    """Takes the run ``run`` (OLD) from its row of ``table``, dropping a row left empty."""
    updates = ", ".join(f"{c} = {c} - {_value(run, c)}" for c in _SUMS)
    where = _where(table, run)
    return [
        f"UPDATE {table} SET {updates} WHERE {where}",
        f"DELETE FROM {table} WHERE {where} AND runs = 0",
    ]


def _difference(table: str) -> str:
    """Adds what an update changed of a run that keeps its row of ``table``."""
    sums = [c for c in _SUMS if c != "runs"]
    updates = ", ".join(f"{c} = {c} + {_value('NEW', c)} - {_value('OLD', c)}" for c in sums)
    return f"UPDATE {table} SET {updates} WHERE {_where(table, 'NEW')}"


_WATCHED = "started_at, status, model_id, created_by, " + ", ".join(_TOKENS)
_SAME_KEYS = " AND ".join(
    f"{_key('OLD', c)} = {_key('NEW', c)}" for c in ("day", "model_key", "creator_key")
)
_CHANGED_VALUES = " OR ".join(
    f"{_value('OLD', c)} <> {_value('NEW', c)}" for c in ("failed", *_TOKENS)
)


def _statements(*parts: str | list[str]) -> str:
    flat = [one for part in parts for one in ([part] if isinstance(part, str) else part)]
    return "; ".join(flat) + ";"


def _all(make: object, run: str) -> str:
    assert callable(make)
    return _statements(*(make(table, run) for table in _TABLES))


_SQLITE_UPGRADE = [
    f"CREATE TRIGGER run_days_run_created AFTER INSERT ON runs BEGIN {_all(_add, 'NEW')} END",
    f"CREATE TRIGGER run_days_run_deleted AFTER DELETE ON runs BEGIN {_all(_take, 'OLD')} END",
    f"CREATE TRIGGER run_days_run_changed AFTER UPDATE OF {_WATCHED} ON runs "
    f"WHEN {_SAME_KEYS} AND ({_CHANGED_VALUES}) BEGIN "
    f"{_statements(*(_difference(table) for table in _TABLES))} END",
    f"CREATE TRIGGER run_days_run_moved AFTER UPDATE OF {_WATCHED} ON runs "
    f"WHEN NOT ({_SAME_KEYS}) BEGIN {_all(_take, 'OLD')} {_all(_add, 'NEW')} END",
]


def _in_key_order(table: str) -> str:
    """Postgres: a moved run leaves its old row and joins its new one in key order."""
    keys = _TABLES[table]
    old = ", ".join(_key("OLD", c) for c in keys)
    new = ", ".join(_key("NEW", c) for c in keys)
    leave, join = _statements(_take(table, "OLD")), _statements(_add(table, "NEW"))
    return f"IF ({old}) < ({new}) THEN {leave} {join} ELSE {join} {leave} END IF;"


_POSTGRES_UPGRADE = [
    "CREATE FUNCTION bridge_store_run_days() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP = 'INSERT' THEN {_all(_add, 'NEW')} RETURN NEW; END IF; "
    f"IF TG_OP = 'DELETE' THEN {_all(_take, 'OLD')} RETURN OLD; END IF; "
    f"IF {_SAME_KEYS} THEN {_statements(*(_difference(table) for table in _TABLES))} "
    f"ELSE {' '.join(_in_key_order(table) for table in _TABLES)} END IF; "
    "RETURN NEW; END $$",
    "CREATE TRIGGER run_days_run_created AFTER INSERT ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_days()",
    "CREATE TRIGGER run_days_run_deleted AFTER DELETE ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_days()",
    f"CREATE TRIGGER run_days_run_changed AFTER UPDATE OF {_WATCHED} ON runs "
    f"FOR EACH ROW WHEN ({_SAME_KEYS} AND ({_CHANGED_VALUES})) "
    "EXECUTE FUNCTION bridge_store_run_days()",
    f"CREATE TRIGGER run_days_run_moved AFTER UPDATE OF {_WATCHED} ON runs "
    f"FOR EACH ROW WHEN (NOT ({_SAME_KEYS})) EXECUTE FUNCTION bridge_store_run_days()",
]
_TRIGGERS = (
    "run_days_run_moved",
    "run_days_run_changed",
    "run_days_run_deleted",
    "run_days_run_created",
)


def _postgres_fill(table: str) -> str:
    keys = ("tenant", *_TABLES[table])
    values = ["r.tenant", *(_key("r", c) for c in _TABLES[table])]
    sums = ["COUNT(*)", *(f"SUM({_value('r', c)})" for c in _SUMS if c != "runs")]
    groups = ", ".join(str(n) for n in range(1, len(keys) + 1))
    return (
        f"INSERT INTO {table} ({', '.join((*keys, *_SUMS))}) "
        f"SELECT {', '.join((*values, *sums))} FROM runs AS r GROUP BY {groups}"
    )


def _run(statements: Sequence[str]) -> None:
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def _label() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _create(table: str) -> None:
    token_sum = sa.BigInteger().with_variant(sa.Numeric(), "postgresql")
    keys = [
        sa.Column(c, sa.BigInteger() if c == "day" else _label(), primary_key=True)
        for c in _TABLES[table]
    ]
    for column in keys:
        column.autoincrement = False
    op.create_table(
        table,
        sa.Column("tenant", _label(), primary_key=True),
        *keys,
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sa.Column("failed", sa.BigInteger(), nullable=False),
        *(sa.Column(c, token_sum, nullable=False) for c in _TOKENS),
        sqlite_with_rowid=False,
    )


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if not sqlite:
        # Writers (a server still on the old code) wait for the commit; readers do not.
        _run(["LOCK TABLE runs IN EXCLUSIVE MODE"])
    for table in _TABLES:
        _create(table)
    op.create_index("ix_run_days_day", "run_days", ["day", "tenant"])
    if sqlite:
        # One upsert per run: a sum near 2^63 becomes a float, where SUM() would fail.
        _run([_add(table, "r", "runs AS r") for table in _TABLES])
        _run(_SQLITE_UPGRADE)
    else:
        _run([_postgres_fill(table) for table in _TABLES])
        _run(_POSTGRES_UPGRADE)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        _run([f"DROP TRIGGER {name}" for name in _TRIGGERS])
    else:
        _run([f"DROP TRIGGER {name} ON runs" for name in _TRIGGERS])
        _run(["DROP FUNCTION bridge_store_run_days()"])
    op.drop_index("ix_run_days_day", table_name="run_days")
    for table in reversed(list(_TABLES)):
        op.drop_table(table)
