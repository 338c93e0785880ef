"""The history's run list across agents, answered from the runs table's summary columns.

Schema revision 0005 keeps each run's :func:`~bridge_store.backend.history.summarize_run` in
columns beside its document (``started_at``, ``status``, ``model_id``,
``duration_ms`` and the token counts), written with every create and update and
filled for older rows by the migration, with the same function. The run list
(:class:`~bridge_store.backend.history.RunHistory`) is then one keyset query: newest first it
walks ``ix_runs_started`` backwards, by duration or tokens revision 0014's
``ix_runs_duration`` or ``ix_runs_tokens``; by cost the database sorts the filtered
runs (their cost depends on the price table of the moment: no index holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.history import MISSING, UNKNOWN, RunFilters, RunKey, RunRow, Sort
from bridge_store.backend.shares import ModelUse, Share, Span
from bridge_store.backend.statistics import Counts
from bridge_store.errors import invalid_argument
from bridge_store.pricing.table import PriceTable
from bridge_store.wire import jsontext

from . import overview, shares
from .agents import SqlAgents
from .cost_order import cost_value
from .engine import Database
from .runs import SqlRuns
from .statements import Session
from .tables import agents as a
from .tables import runs as t


def _sort_value(sort: Sort, prices: PriceTable | None) -> sa.ColumnElement[int]:
    if sort == "cost":
        if prices is None:
            raise invalid_argument("sort=cost needs a price table")
        return cost_value(prices)
    if sort == "duration":
        return _missing_last(t.c.duration_ms)
    if sort == "tokens":
        return _missing_last(t.c.total_tokens)
    return t.c.started_at


def _missing_last(column: sa.Column[Any]) -> sa.ColumnElement[int]:
    # Written as revision 0014's indexes are (the constant inline, not a parameter), so
    # both planners see the index's expression and walk it instead of sorting.
    return sa.func.coalesce(column, sa.literal_column(str(MISSING), sa.BigInteger()))


def runs_query(
    tenant: str,
    filters: RunFilters,
    sort: Sort,
    *,
    after: RunKey | None,
    limit: int,
    prices: PriceTable | None = None,
) -> sa.Select[Any]:
    """A page of the tenant's runs in ``sort`` order, descending, after ``after``; each
    row's document, creator and sort value."""
    value = _sort_value(sort, prices)
    conditions: list[sa.ColumnElement[bool]] = [t.c.tenant == tenant]
    if filters.status is not None:
        conditions.append(t.c.status == filters.status)
    if filters.model is not None:
        conditions.append(t.c.model_id == filters.model)
    if filters.since is not None:
        conditions.append(t.c.started_at >= filters.since)
    if filters.until is not None:
        conditions.append(t.c.started_at < filters.until)
    if filters.creator == UNKNOWN:
        conditions.append(sa.or_(t.c.created_by.is_(None), t.c.created_by == UNKNOWN))
    elif filters.creator is not None:
        conditions.append(t.c.created_by == filters.creator)
    if filters.cwd is not None:
        # The workspace is the agent's: its cwd index names the agents, the runs follow.
        of_cwd = sa.select(a.c.agent_id).where(a.c.tenant == tenant, a.c.cwd == filters.cwd)
        conditions.append(t.c.agent_id.in_(of_cwd.scalar_subquery()))
    if after is not None:
        position = (after.value, after.started, after.agent_id, after.run_id)
        columns = (value, t.c.started_at, t.c.agent_id, t.c.run_id)
        typed = [
            sa.literal(part, type_=column.type)
            for part, column in zip(position, columns, strict=True)
        ]
        conditions.append(sa.tuple_(*columns) < sa.tuple_(*typed))
        # Implied by the comparison above; said apart, it is the bound of the index's
        # range (neither planner takes one from a row-value comparison on an expression).
        conditions.append(value <= typed[0])
    order = [value.desc(), t.c.started_at.desc(), t.c.agent_id.desc(), t.c.run_id.desc()]
    if sort == "newest":
        order = order[1:]
    if sort != "cost":
        query = sa.select(t.c.doc, t.c.created_by, value)
        return query.where(*conditions).order_by(*order).limit(limit)
    # By cost every run the filters leave is priced and sorted. Its keys alone first
    # (from ix_runs_started, which holds every column the price needs), then the page's
    # documents: sorting the documents of every run would read each one.
    key = (
        sa.select(t.c.tenant, t.c.agent_id, t.c.run_id, t.c.started_at, value.label("value"))
        .where(*conditions)
        .order_by(*order)
        .limit(limit)
        .subquery("page")
    )
    found = (
        sa.select(t.c.doc, t.c.created_by, key.c.value)
        .select_from(key)
        .join(
            t,
            sa.and_(
                t.c.tenant == key.c.tenant,
                t.c.agent_id == key.c.agent_id,
                t.c.run_id == key.c.run_id,
            ),
        )
    )
    return found.order_by(
        key.c.value.desc(), key.c.started_at.desc(), key.c.agent_id.desc(), key.c.run_id.desc()
    )


class HistoryRuns(SqlRuns):
    """The runs substore, which also lists runs across agents (RunHistory), counts the
    overview (RunStatistics) and sums who spent what (RunShares)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._history_db = db

    def covers(self, agents: object, runs: object) -> bool:
        """The workspace filter joins this database's agents: only with them."""
        return (
            runs is self
            and isinstance(agents, SqlAgents)
            and agents._db is self._history_db  # another substore of this backend
        )

    async def runs_page(
        self,
        tenant: str,
        filters: RunFilters,
        sort: Sort,
        *,
        after: RunKey | None,
        limit: int,
        prices: PriceTable | None = None,
    ) -> Sequence[RunRow]:
        query = runs_query(tenant, filters, sort, after=after, limit=limit, prices=prices)

        def work(conn: Session) -> list[tuple[str, str | None, Any]]:
            return [(row[0], row[1], row[2]) for row in conn.execute(query)]

        rows = await self._history_db.read(work, what="runs.history")
        return [
            RunRow(jsontext.loads_document(doc), creator, int(key) if sort == "cost" else None)
            for doc, creator, key in rows
        ]

    async def counts(self, tenant: str, *, since: int, until: int) -> Counts:
        """The overview's counts (RunStatistics), from the summaries and tool counts."""

        def work(conn: Session) -> Counts:
            return overview.count(conn, tenant, since, until)

        # Three statements outside a transaction: a run written between them can only
        # be in one count and not another, as a page read a moment later would show.
        return await self._history_db.read(work, what="runs.overview")

    async def day_shares(self, tenant: str, first_day: int, end_day: int) -> list[Share]:
        def work(conn: Session) -> list[Share]:
            return shares.day_shares(conn, tenant, first_day, end_day)

        return await self._history_db.read(work, what="runs.shares")

    async def agent_shares(
        self, tenant: str, spans: Sequence[Span], *, agents_from: int | None = None
    ) -> list[Share]:
        def work(conn: Session) -> list[Share]:
            return shares.agent_shares(conn, tenant, spans, agents_from=agents_from)

        return await self._history_db.read(work, what="runs.shares")

    async def tenant_shares(self, first_day: int, end_day: int) -> list[tuple[str, Share]]:
        def work(conn: Session) -> list[tuple[str, Share]]:
            return shares.tenant_shares(conn, first_day, end_day)

        return await self._history_db.read(work, what="runs.shares")

    async def models_seen(self) -> list[ModelUse]:
        return await self._history_db.read(shares.models_seen, what="runs.models")
