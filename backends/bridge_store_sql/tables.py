"""The SQL schema: one table per substore plus the per-run event counter.

Each row keeps the whole document as JSON text next to the columns the store filters
and sorts on, so documents come back exactly as they were given (unknown fields, key
order, integers) while every list is an index range scan.

Every table is keyed by ``tenant`` first (revision 0002; rows from before it belong to
tenant ``default``).

Identifier columns compare byte-wise on every dialect (SQLite's default BINARY
collation; ``COLLATE "C"`` on Postgres) so list order is the same code point order
everywhere, whatever the database's locale. The migrations in
``bridge_store_migrations`` create exactly this schema; ``tests/test_migrations.py``
compares the two.
"""

from __future__ import annotations

import sqlalchemy as sa

#: Alembic's version table, named for this project so a database shared with another
#: alembic-managed application keeps the two histories apart.
VERSION_TABLE = "bridge_store_alembic_version"


def _id() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _tenant() -> sa.Column[str]:
    # First in every key and index: a tenant's rows are one contiguous range of each
    # index, so every query (all of which filter on tenant) stays a range scan.
    return sa.Column("tenant", _id(), primary_key=True)


#: Revision 0005's index: the run list newest first walks its first four columns; the
#: rest make it covering, so the overview's statements over 100,000 runs read the index
#: alone, never the rows with their documents (bench/overview.py: a third of the time).
RUNS_STARTED_COLUMNS = (
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
    # Revision 0014: the cost order's "has usage" test, so that order reads this index alone.
    "total_tokens",
)


#: Revision 0011's index: each run's tool counts by its day, model and tool (the
#: overview's group order, so it sums them as it reads them), with the run's time
#: (exact range ends) and the sums, so the top tools read this index alone.
RUN_TOOL_DAYS_COLUMNS = (
    "tenant",
    "day",
    "model_id",
    "tool",
    "started_at",
    "calls",
    "failures",
)


def _created_by() -> sa.Column[str]:
    # Revision 0004: the name of the token that created the row, beside the document
    # (never in it); written by create only, NULL for rows from before.
    return sa.Column("created_by", _id(), nullable=True)


metadata = sa.MetaData()

agents = sa.Table(
    "agents",
    metadata,
    _tenant(),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("cwd", _id(), nullable=False),
    sa.Column("updated_at", sa.BigInteger(), nullable=False),
    sa.Column("doc", sa.Text(), nullable=False),
    _created_by(),
    # List order is (updated_at, agent_id) descending: both indexes are read backwards.
    sa.Index("ix_agents_order", "tenant", "updated_at", "agent_id"),
    sa.Index("ix_agents_cwd_order", "tenant", "cwd", "updated_at", "agent_id"),
)

runs = sa.Table(
    "runs",
    metadata,
    _tenant(),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("turn_number", sa.BigInteger(), nullable=False),
    sa.Column("doc", sa.Text(), nullable=False),
    _created_by(),
    # Revision 0005: the run's summary (bridge_store.backend.history.summarize_run), written with
    # the document, for the history's run list across agents and its overview.
    sa.Column("started_at", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("status", _id(), nullable=True),
    sa.Column("model_id", _id(), nullable=True),
    sa.Column("duration_ms", sa.BigInteger(), nullable=True),
    sa.Column("input_tokens", sa.BigInteger(), nullable=True),
    sa.Column("output_tokens", sa.BigInteger(), nullable=True),
    sa.Column("cache_read_tokens", sa.BigInteger(), nullable=True),
    sa.Column("cache_write_tokens", sa.BigInteger(), nullable=True),
    sa.Column("total_tokens", sa.BigInteger(), nullable=True),
    # One index per way of listing: unfiltered, by agent, by run id; and newest first
    # across agents (the history), which also bounds the overview's time range.
    sa.Index("ix_runs_order", "tenant", "turn_number", "run_id", "agent_id"),
    sa.Index("ix_runs_agent_order", "tenant", "agent_id", "turn_number", "run_id"),
    sa.Index("ix_runs_run_order", "tenant", "run_id", "turn_number", "agent_id"),
    sa.Index("ix_runs_started", *RUNS_STARTED_COLUMNS),
)
# Revision 0014: the run list's "most tokens" and "longest" orders, as the history's
# query sorts (history.MISSING, -1, for a run without the value): index name -> column.
RUN_SORT_INDEXES = {"ix_runs_tokens": "total_tokens", "ix_runs_duration": "duration_ms"}
for _name, _column in RUN_SORT_INDEXES.items():
    sa.Index(
        _name,
        runs.c.tenant,
        sa.func.coalesce(runs.c[_column], sa.literal_column("-1")),
        runs.c.started_at,
        runs.c.agent_id,
        runs.c.run_id,
    )

run_event_counters = sa.Table(
    "run_event_counters",
    metadata,
    _tenant(),
    # Postgres: the last seq handed out per run. Appends bump it and insert the event in
    # one statement, so the row lock orders racing appends and a failed append leaves no
    # gap. A run has a counter row exactly when it has events. (SQLite serializes its
    # writers and reads the last seq off run_events instead; see events.py.)
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("last_seq", sa.BigInteger(), nullable=False),
)

run_events = sa.Table(
    "run_events",
    metadata,
    _tenant(),
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("idempotency_key", _id(), nullable=True),
    # The appended event without seq/offset; the stored document is rebuilt with
    # contract.stored_event(doc, seq), because Postgres assigns seq in the same
    # statement that writes the row.
    sa.Column("doc", sa.Text(), nullable=False),
    # Deduplication is the database's job: racing appends with one key cannot both
    # insert. NULL keys never conflict with each other. On Postgres (revision 0010) a
    # unique index over the rows with a key, which the list's plan cannot take in
    # place of the primary key; on SQLite the table's UNIQUE constraint of 0002
    # (SQLITE_KEY_CONSTRAINT).
    sa.Index(
        "uq_run_events_idempotency_key",
        "tenant",
        "run_id",
        "idempotency_key",
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    ),
)

#: On SQLite, the uniqueness of (tenant, run_id, idempotency_key) is the table's own
#: constraint of revision 0002, not the index declared above: only a rebuild of
#: ``run_events`` could turn one into the other, and SQLite never mistook it for the
#: primary key. The schema comparison in the tests checks it apart.
SQLITE_KEY_CONSTRAINT = "uq_run_events_idempotency_key"

run_tool_calls = sa.Table(
    "run_tool_calls",
    metadata,
    _tenant(),
    # Revision 0006: per run and tool, the tool calls its events ended and how many of
    # them failed (bridge_store.backend.statistics.tool_outcome), counted as events are
    # appended or restored and dropped with the run's events, for the overview.
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("tool", _id(), primary_key=True),
    sa.Column("calls", sa.BigInteger(), nullable=False),
    sa.Column("failures", sa.BigInteger(), nullable=False),
    # SQLite: the rows live in the key's b-tree, so an append's count and a run's
    # trigger (by tenant and run_id) read one b-tree, not an index and then the rows.
    sqlite_with_rowid=False,
)

run_tool_days = sa.Table(
    "run_tool_days",
    metadata,
    _tenant(),
    # Revision 0011: run_tool_calls' counts for each run of the run id (runs are keyed
    # by agent and run id, events by run id), with the run's started_at, its day
    # (started_at // a day's ms) and model_id. Written by the database's own triggers
    # (see the revision) on every write of runs and run_tool_calls, never by the
    # backend; the overview reads its top tools from here.
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("tool", _id(), primary_key=True),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("started_at", sa.BigInteger(), nullable=False),
    sa.Column("day", sa.BigInteger(), nullable=False),
    sa.Column("model_id", _id(), nullable=True),
    sa.Column("calls", sa.BigInteger(), nullable=False),
    sa.Column("failures", sa.BigInteger(), nullable=False),
    sa.Index("ix_run_tool_days_day", *RUN_TOOL_DAYS_COLUMNS),
    sqlite_with_rowid=False,
)


def _token_sum(name: str) -> sa.Column[int]:
    # A sum of token counts, each within 2^53: NUMERIC on Postgres, where a bigint sum
    # of hostile counts would overflow and fail the run's write; SQLite's integer turns
    # into a float past 2^63 instead of failing.
    kind = sa.BigInteger().with_variant(sa.Numeric(), "postgresql")
    return sa.Column(name, kind, nullable=False)


def _share_sums() -> list[sa.Column[int]]:
    return [
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sa.Column("failed", sa.BigInteger(), nullable=False),
        *(_token_sum(name) for name in SHARE_TOKEN_COLUMNS),
    ]


#: The token sums of revision 0013's share tables, in ``history.TOKEN_KINDS`` order.
SHARE_TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")

#: Revision 0013: per UTC day, the runs, failures and token sums of each model and
#: creator (``model_key`` and ``creator_key`` are '' for none: a key cannot be NULL),
#: kept by triggers on ``runs`` (see the revision); by-day, by-model and by-creator
#: figures, the month's spend and /metrics read ranges of days of it.
run_days = sa.Table(
    "run_days",
    metadata,
    _tenant(),
    sa.Column("day", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("model_key", _id(), primary_key=True),
    sa.Column("creator_key", _id(), primary_key=True),
    *_share_sums(),
    # /metrics sums every tenant's days of this month: one range of days.
    sa.Index("ix_run_days_day", "day", "tenant"),
    sqlite_with_rowid=False,
)

#: Revision 0013: the same per UTC day, agent and model.
run_agent_days = sa.Table(
    "run_agent_days",
    metadata,
    _tenant(),
    sa.Column("day", sa.BigInteger(), primary_key=True, autoincrement=False),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("model_key", _id(), primary_key=True),
    *_share_sums(),
    sqlite_with_rowid=False,
)

checkpoint_blobs = sa.Table(
    "checkpoint_blobs",
    metadata,
    _tenant(),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("blob_id", _id(), primary_key=True),
    sa.Column("data", sa.LargeBinary(), nullable=False),
    # List order is (blob_id, agent_id).
    sa.Index("ix_checkpoint_blobs_order", "tenant", "blob_id", "agent_id"),
)

run_export_queue = sa.Table(
    "run_export_queue",
    metadata,
    # Revision 0012: the runs ``serve --export-runs`` has yet to send (features.
    # ExportQueue), every tenant's in one queue; a run queued again has one row, its
    # time replaced, so an unqueue of the time taken leaves it queued.
    _tenant(),
    sa.Column("agent_id", _id(), primary_key=True),
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("queued_ms", sa.BigInteger(), nullable=False),
    # The exporter takes the oldest first, across tenants.
    sa.Index("ix_run_export_queue_order", "queued_ms", "tenant", "agent_id", "run_id"),
)

#: Revision 0011's triggers, which keep ``run_tool_days`` in step with ``runs`` and
#: ``run_tool_calls`` (by name on both dialects; Postgres runs them through two plpgsql
#: functions), are the database's own too, like the search index below.
TOOL_COUNT_TRIGGERS = frozenset(
    {
        "run_tool_days_run_created",
        "run_tool_days_run_moved",
        "run_tool_days_run_deleted",
        "run_tool_days_counted",
        "run_tool_days_recounted",
        "run_tool_days_uncounted",
    }
)

#: Revision 0013's triggers on ``runs``, which keep ``run_days`` and ``run_agent_days``
#: (by name on both dialects; Postgres runs them through one plpgsql function).
SHARE_TRIGGERS = frozenset(
    {
        "run_days_run_created",
        "run_days_run_deleted",
        "run_days_run_changed",
        "run_days_run_moved",
    }
)

#: Full-text search (revision 0003, read by ``search.py``) is kept current by the
#: database itself, not written through ``metadata``: on SQLite these tables (two FTS5
#: tables with their shadow tables, and the id maps behind their rowids, filled by
#: triggers on ``agents`` and ``run_events``), on Postgres these expression indexes.
SQLITE_SEARCH_TABLES = frozenset(
    {
        "search_agent_rows",
        "search_event_rows",
        *(
            f"{fts}{suffix}"
            for fts in ("search_agents", "search_events")
            for suffix in ("", "_data", "_idx", "_docsize", "_config")
        ),
    }
)
POSTGRES_SEARCH_INDEXES = frozenset({"ix_agents_search", "ix_run_events_search"})
