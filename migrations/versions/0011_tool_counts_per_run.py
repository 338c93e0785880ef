"""Tool counts per run, kept exact whatever order writes arrive in, and recounted.

Revision 0008 copied a run's time and model into the ``run_tool_calls`` rows of its run
id, one row per (run id, tool). Two things went wrong:

- On Postgres, a run's create and its first tool call, committed at the same moment,
  each looked for the other's row before it was committed: the count kept no day
  (20 of 150 tool calls were counted under load). SQLite, which has one writer at a
  time, held.
- Runs are keyed by (agent, run id) and events by run id: the same run id under two
  agents is two runs, each of which a scan of the history counts the events of. One
  row per run id could hold one run's day, and deleting either run forgot both.

``run_tool_calls`` is now what the events hold per run id, nothing more (the append
statements count into it as before). The new table ``run_tool_days`` (tenant, run_id,
tool, agent_id) holds, for each run with that id, its ``started_at``, ``day`` and
``model_id`` with the calls and failures, and the index ``ix_run_tool_days_day``
(tenant, day, model_id, tool, started_at, calls, failures), from which the overview
reads its top tools as before: one range, no join. The database keeps it current:

- a run's insert copies the counts of its run id; an update that changes its
  ``started_at`` or ``model_id`` rewrites them; its delete drops its rows only;
- a count's insert or update writes it for every run with its run id; its delete
  drops it for all of them.

On Postgres the two inserts could miss each other: a run inserted while the first count
of its run id is inserted, neither committed, neither row visible to the other's
trigger. So both insert triggers first take a transaction-scoped advisory lock on
(tenant, run id), in a key space of their own (:data:`LOCK_CLASS`, the two-integer
form, which neither the leases nor the migrations use), and read the other table
after it, in a fresh snapshot (each PL/pgSQL statement takes one under READ
COMMITTED): of two racing inserts the second waits for the first's commit and sees
its row. They read the other table ``FOR SHARE``, so a concurrent update or delete of
a row they copy waits for their commit (its trigger then rewrites or drops the copy)
or they wait for its commit and copy what it left. Updates and deletes need no lock:
the rows they change are visible, and their row locks order them. A statement takes
one lock per run id it inserts (a run, or a run's counts), so bulk deletes take none.
The lock's second key is the hash of (tenant, run id) folded into :data:`LOCK_BUCKETS`
values: a transaction holds at most that many locks, however many runs it inserts
(one lock per run id ran Postgres out of lock slots, "out of shared memory", at a
few thousand runs in one statement), and two inserts of different run ids that share
a bucket only wait for each other's commit.

The upgrade drops 0008's triggers, index and columns, counts every stored event again
(0006's backfill: a tool count that was ever wrong is right afterwards), and fills
``run_tool_days`` in one join; on Postgres it first locks the three tables against
writes, so a server still on the old code waits for it rather than writing between
the recount and the triggers. Downgrading puts 0008 back as 0008 built it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 09:00:00
"""

# The statements are put together from this file's constants only, never from input.
# ruff: noqa: S608

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

import sqlalchemy as sa
from alembic import op

from bridge_store.backend.statistics import DAY_MS

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The first key of every tool-count advisory lock ("bs", 0x0011).
LOCK_CLASS = 0x62730011
#: How many locks of :data:`LOCK_CLASS` there are; bounds the locks one transaction holds
#: (Postgres has ``max_locks_per_transaction`` x connections slots, 6,400 by default).
LOCK_BUCKETS = 1024
_TABLE = "run_tool_days"
_INDEX = "ix_run_tool_days_day"
_COLUMNS = "tenant, run_id, tool, agent_id, started_at, day, model_id, calls, failures"
#: The index's columns: the overview's group order, then what it sums.
DAY_COLUMNS = ("tenant", "day", "model_id", "tool", "started_at", "calls", "failures")


def _previous(name: str) -> ModuleType:
    """An earlier revision's module, whose statements this one undoes or redoes."""
    return importlib.import_module(f"bridge_store_migrations.versions.{name}")


def _lock(row: str) -> str:
    return (
        f"PERFORM pg_advisory_xact_lock({LOCK_CLASS}, "
        f"hashtext({row}.tenant || ':' || {row}.run_id) & {LOCK_BUCKETS - 1})"
    )


def _of_run(run: str, share: str = "") -> str:
    """``run`` (NEW) gets a row per tool its run id has counts of."""
    return (
        f"INSERT INTO {_TABLE} ({_COLUMNS}) "
        f"SELECT {run}.tenant, {run}.run_id, c.tool, {run}.agent_id, {run}.started_at, "
        f"{run}.started_at / {DAY_MS}, {run}.model_id, c.calls, c.failures "
        f"FROM run_tool_calls AS c WHERE c.tenant = {run}.tenant AND c.run_id = {run}.run_id"
        f"{share}"
    )


def _moved(run: str) -> str:
    return (
        f"UPDATE {_TABLE} SET started_at = {run}.started_at, day = {run}.started_at / "
        f"{DAY_MS}, model_id = {run}.model_id WHERE tenant = {run}.tenant AND "
        f"run_id = {run}.run_id AND agent_id = {run}.agent_id"
    )


def _gone(run: str) -> str:
    return (
        f"DELETE FROM {_TABLE} WHERE tenant = {run}.tenant AND run_id = {run}.run_id "
        f"AND agent_id = {run}.agent_id"
    )


def _counted(count: str, runs_from: str, share: str = "") -> str:
    """``count`` (NEW) written for every run of its run id, inserted or replaced."""
    return (
        f"INSERT INTO {_TABLE} ({_COLUMNS}) "
        f"SELECT {count}.tenant, {count}.run_id, {count}.tool, r.agent_id, r.started_at, "
        f"r.started_at / {DAY_MS}, r.model_id, {count}.calls, {count}.failures "
        f"FROM {runs_from} WHERE r.tenant = {count}.tenant AND r.run_id = {count}.run_id"
        f"{share} ON CONFLICT (tenant, run_id, tool, agent_id) DO UPDATE SET "
        "started_at = excluded.started_at, day = excluded.day, model_id = excluded.model_id, "
        "calls = excluded.calls, failures = excluded.failures"
    )


def _recounted(count: str) -> str:
    return (
        f"UPDATE {_TABLE} SET calls = {count}.calls, failures = {count}.failures "
        f"WHERE tenant = {count}.tenant AND run_id = {count}.run_id AND tool = {count}.tool"
    )


def _uncounted(count: str) -> str:
    return (
        f"DELETE FROM {_TABLE} WHERE tenant = {count}.tenant AND run_id = {count}.run_id "
        f"AND tool = {count}.tool"
    )


_CHANGED = "OLD.started_at IS NOT NEW.started_at OR OLD.model_id IS NOT NEW.model_id"
#: SQLite would pick the covering ix_runs_started (tenant only) without it.
_SQLITE_RUNS = "runs AS r INDEXED BY ix_runs_run_order"

#: The triggers, by name on both dialects (tables.TOOL_COUNT_TRIGGERS).
_SQLITE_UPGRADE = [
    f"CREATE TRIGGER run_tool_days_run_created AFTER INSERT ON runs BEGIN {_of_run('NEW')}; END",
    "CREATE TRIGGER run_tool_days_run_moved AFTER UPDATE OF started_at, model_id ON runs "
    f"WHEN {_CHANGED} BEGIN {_moved('NEW')}; END",
    f"CREATE TRIGGER run_tool_days_run_deleted AFTER DELETE ON runs BEGIN {_gone('OLD')}; END",
    "CREATE TRIGGER run_tool_days_counted AFTER INSERT ON run_tool_calls BEGIN "
    f"{_counted('NEW', _SQLITE_RUNS)}; END",
    "CREATE TRIGGER run_tool_days_recounted AFTER UPDATE OF calls, failures ON run_tool_calls "
    f"BEGIN {_recounted('NEW')}; END",
    "CREATE TRIGGER run_tool_days_uncounted AFTER DELETE ON run_tool_calls BEGIN "
    f"{_uncounted('OLD')}; END",
]
_POSTGRES_UPGRADE = [
    "CREATE FUNCTION bridge_store_run_tool_days_of_run() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP = 'DELETE' THEN {_gone('OLD')}; RETURN OLD; END IF; "
    f"IF TG_OP = 'INSERT' THEN {_lock('NEW')}; {_of_run('NEW', ' FOR SHARE OF c')}; "
    f"ELSE {_moved('NEW')}; END IF; "
    "RETURN NEW; END $$",
    "CREATE FUNCTION bridge_store_run_tool_days_of_count() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN "
    f"IF TG_OP = 'DELETE' THEN {_uncounted('OLD')}; RETURN OLD; END IF; "
    f"IF TG_OP = 'INSERT' THEN {_lock('NEW')}; {_counted('NEW', 'runs AS r', ' FOR SHARE OF r')}; "
    f"ELSE {_recounted('NEW')}; END IF; "
    "RETURN NEW; END $$",
    "CREATE TRIGGER run_tool_days_run_created AFTER INSERT ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_tool_days_of_run()",
    "CREATE TRIGGER run_tool_days_run_moved AFTER UPDATE OF started_at, model_id ON runs "
    f"FOR EACH ROW WHEN ({_CHANGED.replace('IS NOT', 'IS DISTINCT FROM')}) "
    "EXECUTE FUNCTION bridge_store_run_tool_days_of_run()",
    "CREATE TRIGGER run_tool_days_run_deleted AFTER DELETE ON runs "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_tool_days_of_run()",
    "CREATE TRIGGER run_tool_days_counted AFTER INSERT ON run_tool_calls "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_tool_days_of_count()",
    "CREATE TRIGGER run_tool_days_recounted AFTER UPDATE OF calls, failures ON run_tool_calls "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_tool_days_of_count()",
    "CREATE TRIGGER run_tool_days_uncounted AFTER DELETE ON run_tool_calls "
    "FOR EACH ROW EXECUTE FUNCTION bridge_store_run_tool_days_of_count()",
]
_TRIGGERS = [
    ("run_tool_days_uncounted", "run_tool_calls"),
    ("run_tool_days_recounted", "run_tool_calls"),
    ("run_tool_days_counted", "run_tool_calls"),
    ("run_tool_days_run_deleted", "runs"),
    ("run_tool_days_run_moved", "runs"),
    ("run_tool_days_run_created", "runs"),
]
_SQLITE_DOWNGRADE = [f"DROP TRIGGER {name}" for name, _ in _TRIGGERS]
_POSTGRES_DOWNGRADE = [
    *(f"DROP TRIGGER {name} ON {table}" for name, table in _TRIGGERS),
    "DROP FUNCTION bridge_store_run_tool_days_of_count()",
    "DROP FUNCTION bridge_store_run_tool_days_of_run()",
]

#: Every run's rows, from the recounted counts of its run id.
_FILL = (
    f"INSERT INTO {_TABLE} ({_COLUMNS}) "
    f"SELECT c.tenant, c.run_id, c.tool, r.agent_id, r.started_at, r.started_at / {DAY_MS}, "
    "r.model_id, c.calls, c.failures FROM run_tool_calls AS c "
    "JOIN runs AS r ON r.tenant = c.tenant AND r.run_id = c.run_id"
)


def _run(statements: Sequence[str]) -> None:
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def _label() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if not sqlite:
        # Writers (a server still on the old code) wait for the commit; readers do not.
        _run(["LOCK TABLE runs, run_events, run_tool_calls IN EXCLUSIVE MODE"])
    windows = _previous("0008_tool_count_windows")
    _run(windows._SQLITE_DOWNGRADE if sqlite else windows._POSTGRES_DOWNGRADE)
    op.drop_index(windows._INDEX, table_name="run_tool_calls")
    for column in ("model_id", "day", "started_at"):
        op.drop_column("run_tool_calls", column)
    _run(["DELETE FROM run_tool_calls"])
    _previous("0006_tool_counts").backfill(bind)
    op.create_table(
        _TABLE,
        sa.Column("tenant", _label(), primary_key=True),
        sa.Column("run_id", _label(), primary_key=True),
        sa.Column("tool", _label(), primary_key=True),
        sa.Column("agent_id", _label(), primary_key=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("day", sa.BigInteger(), nullable=False),
        sa.Column("model_id", _label(), nullable=True),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.BigInteger(), nullable=False),
        sqlite_with_rowid=False,
    )
    _run([_FILL])
    op.create_index(_INDEX, _TABLE, list(DAY_COLUMNS))
    _run(_SQLITE_UPGRADE if sqlite else _POSTGRES_UPGRADE)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    _run(_SQLITE_DOWNGRADE if sqlite else _POSTGRES_DOWNGRADE)
    op.drop_index(_INDEX, table_name=_TABLE)
    op.drop_table(_TABLE)
    windows = _previous("0008_tool_count_windows")
    for column in windows._columns():
        op.add_column("run_tool_calls", column)
    _run([windows._SQLITE_BACKFILL if sqlite else windows._POSTGRES_BACKFILL])
    op.create_index(windows._INDEX, "run_tool_calls", list(windows.DAY_COLUMNS))
    _run(windows._SQLITE_UPGRADE if sqlite else windows._POSTGRES_UPGRADE)
