"""The runEvents substore: the append-only log, and the hot path.

Uniqueness of (run_id, seq) and (run_id, idempotency_key) is enforced by the database,
so no interleaving of processes can store a duplicate; how seq is chosen differs:

- Postgres: a per-run counter row that every append bumps in the same statement that
  inserts the event (a data-modifying CTE, run in autocommit: one round trip). Racing
  appends to one run, from any number of processes, queue on that row's lock and get
  consecutive numbers; an append that fails rolls its bump back, so the log has no gaps.
- SQLite: writers are serialized anyway (``BEGIN IMMEDIATE``), so the insert reads the
  run's last seq off the primary key in the same statement.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.dialects import postgresql

from bridge_store.backend.statistics import tool_outcome
from bridge_store.backend.substores import appended_event, duplicate_key, restorable, stored_event
from bridge_store.types import Document
from bridge_store.wire import jsontext

from . import tool_counts
from .engine import Database, Work
from .filters import one_of, tenants_of
from .statements import Result, Session
from .tables import run_event_counters as counters
from .tables import run_events as t
from .tables import run_tool_calls

#: Run ids per page of ``run_ids``.
RUN_ID_PAGE = 1000

_APPEND = sa.text(
    """
    WITH counter AS (
        INSERT INTO run_event_counters AS c (tenant, run_id, last_seq)
        VALUES (:tenant, :run_id, 1)
        ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = c.last_seq + 1
        RETURNING last_seq
    )
    INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
    SELECT :tenant, :run_id, last_seq, NULL, :doc FROM counter
    RETURNING seq
    """
).columns(seq=sa.BigInteger())

# With a key, a retry of an append that already happened is answered by the same single
# statement: the counter is only bumped when no event holds the key yet.
_APPEND_WITH_KEY = sa.text(
    """
    WITH existing AS (
        SELECT seq, doc FROM run_events
        WHERE tenant = :tenant AND run_id = :run_id AND idempotency_key = :key
    ), counter AS (
        INSERT INTO run_event_counters AS c (tenant, run_id, last_seq)
        SELECT :tenant, :run_id, 1 WHERE NOT EXISTS (SELECT FROM existing)
        ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = c.last_seq + 1
        RETURNING last_seq
    ), appended AS (
        INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
        SELECT :tenant, :run_id, last_seq, :key, :doc FROM counter
        RETURNING seq
    )
    SELECT seq, NULL AS doc FROM appended
    UNION ALL
    SELECT seq, doc FROM existing
    """
).columns(seq=sa.BigInteger(), doc=sa.Text())


_BY_KEY = sa.select(t.c.seq, t.c.doc).where(
    t.c.tenant == sa.bindparam("b_tenant"),
    t.c.run_id == sa.bindparam("b_run_id"),
    t.c.idempotency_key == sa.bindparam("b_key"),
)


def by_key_query(tenant: str, run_id: str, key: str) -> sa.Select[tuple[int, str]]:
    """The idempotency-key lookup with its parameters bound (for EXPLAIN in tests)."""
    return _BY_KEY.params(b_tenant=tenant, b_run_id=run_id, b_key=key)


def _by_key(conn: Session, tenant: str, run_id: str, key: str) -> Result:
    return conn.execute(_BY_KEY, {"b_tenant": tenant, "b_run_id": run_id, "b_key": key})


# Built once with bound parameters (see agents.py): a primary-key range scan,
# (tenant, run_id, seq) > (tenant, run_id, after_seq).
_LIST = (
    sa.select(t.c.seq, t.c.doc)
    .where(
        t.c.tenant == sa.bindparam("b_tenant"),
        t.c.run_id == sa.bindparam("b_run_id"),
        t.c.seq > sa.bindparam("b_after_seq", type_=sa.BigInteger()),
    )
    .order_by(t.c.seq)
    .limit(sa.bindparam("b_limit", type_=sa.Integer()))
)


def list_query(
    tenant: str, run_id: str, *, after_seq: int, limit: int
) -> sa.Select[tuple[int, str]]:
    """The list statement with its parameters bound (for EXPLAIN in the plan tests)."""
    return _LIST.params(b_tenant=tenant, b_run_id=run_id, b_after_seq=after_seq, b_limit=limit)


_LAST_SEQ = sa.text(
    "SELECT MAX(seq) FROM run_events WHERE tenant = :tenant AND run_id = :run_id"
).columns(seq=sa.BigInteger())
# A run without events has no counter row to lock, so restore makes one first (and
# the transaction either fills it in or takes it out again): racing restores of one
# run then queue on it like appends do, instead of both inserting the same seqs.
_LOCK_COUNTER = sa.text(
    """
    INSERT INTO run_event_counters (tenant, run_id, last_seq) VALUES (:tenant, :run_id, 0)
    ON CONFLICT (tenant, run_id) DO NOTHING
    """
)
_DROP_EMPTY_COUNTER = sa.text(
    "DELETE FROM run_event_counters WHERE tenant = :tenant AND run_id = :run_id AND last_seq = 0"
)
_LAST_SEQ_LOCKED = sa.text(
    "SELECT last_seq FROM run_event_counters WHERE tenant = :tenant AND run_id = :run_id FOR UPDATE"
).columns(last_seq=sa.BigInteger())
_SET_COUNTER = sa.text(
    """
    INSERT INTO run_event_counters AS c (tenant, run_id, last_seq)
    VALUES (:tenant, :run_id, :last_seq)
    ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = :last_seq
    """
)


def _run(tenant: str, run_id: str) -> dict[str, str]:
    return {"tenant": tenant, "run_id": run_id}


# An append answers (seq, None) when it stored the event, or (seq, doc) of the event
# that already held the idempotency key.
Appended = tuple[int, str | None]


#: (tool, failed) of an event that ends a tool call, counted with it (tool_counts.py).
Outcome = tuple[str, bool] | None


def _append_postgres(
    conn: Session, tenant: str, event: Document, doc: str, outcome: Outcome
) -> Appended:
    key = event["idempotencyKey"]
    params: dict[str, Any] = {"tenant": tenant, "run_id": event["runId"], "doc": doc}
    plain, keyed = _APPEND, _APPEND_WITH_KEY
    if outcome is not None:
        params.update(tool=outcome[0], failed=int(outcome[1]))
        plain, keyed = tool_counts.APPEND_POSTGRES, tool_counts.APPEND_WITH_KEY_POSTGRES
    if key is None:
        return (conn.execute(plain, params)).scalar_one(), None
    row = (conn.execute(keyed, {**params, "key": key})).one()
    return row[0], row[1]


# SQLite: writers are serialized (one BEGIN IMMEDIATE at a time, across processes too),
# so the next seq is simply one past the run's last, read off the primary key by the
# statement that inserts the event: one statement instead of a counter bump and an
# insert.
_APPEND_SQLITE = sa.text(
    """
    INSERT INTO run_events (tenant, run_id, seq, idempotency_key, doc)
    SELECT :tenant, :run_id, next_seq, :key, :doc
    FROM (
        SELECT COALESCE(MAX(seq), 0) + 1 AS next_seq FROM run_events
        WHERE tenant = :tenant AND run_id = :run_id
    )
    WHERE NOT EXISTS (
        SELECT 1 FROM run_events
        WHERE tenant = :tenant AND run_id = :run_id AND idempotency_key = :key
    )
    RETURNING seq
    """
).columns(seq=sa.BigInteger())


def _append_sqlite(
    conn: Session, tenant: str, event: Document, doc: str, outcome: Outcome
) -> Appended:
    run_id, key = event["runId"], event["idempotencyKey"]
    params = {"tenant": tenant, "run_id": run_id, "key": key, "doc": doc}
    seq = (conn.execute(_APPEND_SQLITE, params)).scalar_one_or_none()
    if seq is not None:
        if outcome is not None:
            tool, failed = outcome
            count = {"tenant": tenant, "run_id": run_id, "tool": tool, "calls": 1}
            conn.execute(tool_counts.ADD, {**count, "failures": int(failed)})
        return seq, None
    existing = _by_key(conn, tenant, run_id, key).one()
    return existing[0], existing[1]


class SqlRunEvents:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(self, tenant: str, event: Document) -> Document:
        doc = jsontext.dumps_text(event)
        run_id, key = event["runId"], event["idempotencyKey"]
        append = _append_postgres if self._db.dialect == "postgresql" else _append_sqlite
        outcome = tool_outcome(event)

        def work(conn: Session) -> Appended:
            return append(conn, tenant, event, doc, outcome)

        try:
            seq, stored = await self._db.write(
                work,
                what="runEvents.append",
                atomic=False,
                retry=key is not None,
                doc_bytes=len(doc),
            )
        except sa_exc.IntegrityError:
            # Only a racing append with the same key on Postgres, committed between our
            # duplicate check and our insert, gets here: our statement (and its counter
            # bump) was rolled back; the winner's event is the answer.
            if key is None or self._db.dialect != "postgresql":
                raise

            def winner(conn: Session) -> tuple[int, str] | None:
                row = _by_key(conn, tenant, run_id, key).one_or_none()
                return (row[0], row[1]) if row is not None else None

            found = await self._db.read(winner, what="runEvents.append")
            if found is None:
                raise
            seq, stored = found
        # Ours was stored: the event is what we wrote, no need to parse it back.
        return stored_event(event if stored is None else jsontext.loads_document(stored), seq)

    async def list(self, tenant: str, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        params = {
            "b_tenant": tenant,
            "b_run_id": run_id,
            "b_after_seq": after_seq,
            "b_limit": limit,
        }

        def work(conn: Session) -> list[tuple[int, str]]:
            return [(row[0], row[1]) for row in conn.execute(_LIST, params)]

        rows = await self._db.read(work, what="runEvents.list")
        return [stored_event(jsontext.loads_document(doc), seq) for seq, doc in rows]

    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        postgres = self._db.dialect == "postgresql"

        def work(conn: Session) -> int:
            # On Postgres the counter row, locked for the transaction, orders this
            # against racing appends and restores; SQLite's writer is alone anyway.
            if postgres:
                conn.execute(_LOCK_COUNTER, _run(tenant, run_id))
            last = conn.execute(_LAST_SEQ_LOCKED if postgres else _LAST_SEQ, _run(tenant, run_id))
            new = restorable(run_id, events, last.scalar_one_or_none() or 0)
            if not new:
                if postgres:
                    # A run has a counter row exactly when it has events.
                    conn.execute(_DROP_EMPTY_COUNTER, _run(tenant, run_id))
                return 0
            keys = [event["idempotencyKey"] for event in new if event["idempotencyKey"] is not None]
            if keys:
                held = conn.scalars(
                    sa.select(t.c.idempotency_key)
                    .where(*_runs(t, tenant, [run_id]), one_of(t.c.idempotency_key, keys))
                    .limit(1)
                ).first()
                if held is not None:
                    raise duplicate_key(run_id, held)
            conn.execute(
                sa.insert(t),
                [
                    {
                        "tenant": tenant,
                        "run_id": run_id,
                        "seq": event["seq"],
                        "idempotency_key": event["idempotencyKey"],
                        "doc": jsontext.dumps_text(appended_event(event)),
                    }
                    for event in new
                ],
            )
            if postgres:
                conn.execute(_SET_COUNTER, {**_run(tenant, run_id), "last_seq": new[-1]["seq"]})
            if counts := tool_counts.added(tenant, new):
                conn.execute(tool_counts.ADD, counts)
            return len(new)

        return await self._db.write(work, what="runEvents.restore", atomic=True, retry=True)

    async def delete(self, tenant: str, run_ids: Sequence[str] | None) -> None:
        def work(conn: Session) -> None:
            if self._db.dialect == "sqlite":
                # No counters on SQLite: a run's next seq is read off its events.
                conn.execute(sa.delete(t).where(*_runs(t, tenant, run_ids)))
                conn.execute(tool_counts.of_runs(tenant, run_ids))
                return
            # Deleting the counters first locks those runs: appends to them wait for our
            # commit. The events are then deleted in a fresh snapshot (READ COMMITTED)
            # that holds every event appended before the lock, and only for the runs
            # whose counter we hold, so an append that starts meanwhile to a run we
            # did not lock keeps both its event and its counter.
            locked = list(
                conn.scalars(
                    sa.delete(counters)
                    .where(*_runs(counters, tenant, run_ids))
                    .returning(counters.c.run_id)
                )
            )
            if locked:
                for table in (t, run_tool_calls):
                    conn.execute(
                        sa.delete(table).where(
                            table.c.tenant == tenant,
                            table.c.run_id
                            == sa.any_(sa.literal(locked, postgresql.ARRAY(sa.Text()))),
                        )
                    )

        await self._db.write(work, what="runEvents.delete", atomic=True, retry=True)

    async def tenants(self) -> builtins.list[str]:
        return await self._db.read(tenants_of(t), what="runEvents.tenants")

    async def run_ids(self, tenant: str) -> AsyncIterator[builtins.list[str]]:
        after: str | None = None
        while page := await self._db.read(_run_ids_after(tenant, after), what="runEvents.run_ids"):
            yield page
            after = page[-1]


def _run_ids_after(tenant: str, after: str | None) -> Work[builtins.list[str]]:
    # DISTINCT over the primary key's prefix (tenant, run_id): an index range scan.
    query = sa.select(t.c.run_id).where(t.c.tenant == tenant).distinct()
    if after is not None:
        query = query.where(t.c.run_id > after)
    statement = query.order_by(t.c.run_id).limit(RUN_ID_PAGE)

    def work(conn: Session) -> builtins.list[str]:
        return list(conn.scalars(statement))

    return work


def _runs(
    table: sa.Table, tenant: str, run_ids: Sequence[str] | None
) -> list[sa.ColumnElement[bool]]:
    of_tenant = table.c.tenant == tenant
    return [of_tenant] if run_ids is None else [of_tenant, one_of(table.c.run_id, run_ids)]
