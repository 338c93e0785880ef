"""Who spent what, from revision 0013's per-day sums (``run_days``, ``run_agent_days``).

Each answer is one range of days of one table's primary key (tenant, day, ...):
per (day, model, creator) the rows as stored; per (span, model, agent) the rows of
the spans' days, summed per span here (Python integers: exact). Sums the database
adds are summed with SQLite's ``total()`` (a float, exact while a sum stays below
2^53, and a float rather than an "integer overflow" error for hostile counts past
2^63) and Postgres's ``sum()`` over NUMERIC (exact, a Decimal here); either way an
int reaches the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.shares import ModelUse, Share, Span
from bridge_store.backend.statistics import Totals

from .statements import Session
from .tables import SHARE_TOKEN_COLUMNS, run_agent_days, run_days


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def _who(key: str) -> str | None:
    return key or None


def _sum(dialect: str, column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    return sa.func.total(column) if dialect == "sqlite" else sa.func.sum(column)


def _sums(table: sa.Table, dialect: str) -> list[sa.ColumnElement[Any]]:
    return [
        sa.func.sum(table.c.runs),
        sa.func.sum(table.c.failed),
        *(_sum(dialect, table.c[name]) for name in SHARE_TOKEN_COLUMNS),
    ]


def _share(at: int, model: str, who: str | None, sums: Sequence[Any]) -> Share:
    runs, failed, *tokens = (_int(value) for value in sums)
    return Share(at, _who(model), who, runs, failed, (tokens[0], tokens[1], tokens[2], tokens[3]))


def day_shares(session: Session, tenant: str, first_day: int, end_day: int) -> list[Share]:
    d = run_days
    columns = [d.c[name] for name in ("runs", "failed", *SHARE_TOKEN_COLUMNS)]
    query = sa.select(d.c.day, d.c.model_key, d.c.creator_key, *columns).where(
        d.c.tenant == tenant, d.c.day >= first_day, d.c.day < end_day
    )
    return [
        _share(int(day), model, _who(creator), sums)
        for day, model, creator, *sums in session.execute(query)
    ]


def day_totals(session: Session, tenant: str, first_day: int, end_day: int) -> list[Totals]:
    """Per (day, model) of the days ``[first_day, end_day)``: the overview's totals."""
    d = run_days
    query = (
        sa.select(d.c.day, d.c.model_key, *_sums(d, session.dialect.name))
        .where(d.c.tenant == tenant, d.c.day >= first_day, d.c.day < end_day)
        .group_by(d.c.day, d.c.model_key)
    )
    return [
        Totals(int(day), _who(model), *(_int(value) for value in sums))
        for day, model, *sums in session.execute(query)
    ]


def agent_shares(
    session: Session, tenant: str, spans: Sequence[Span], *, agents_from: int | None = None
) -> list[Share]:
    """``RunShares.agent_shares``: one range of the primary key, or with ``agents_from``
    two (the days from it; the days before it, of the agents the first range holds)."""
    if not spans:
        return []
    a = run_agent_days
    columns: list[sa.ColumnElement[Any]] = [a.c.runs, a.c.failed]
    if session.dialect.name == "postgresql":
        # NUMERIC reaches Python as a Decimal, slow to make (49,000 rows of four: 300 ms
        # of asyncpg's time); its text is the integer's digits (a sum of integers has no
        # fraction), which int() reads exactly and fast.
        columns += [sa.cast(a.c[name], sa.Text) for name in SHARE_TOKEN_COLUMNS]
    else:
        columns += [a.c[name] for name in SHARE_TOKEN_COLUMNS]
    first, end = min(first for first, _ in spans), max(end for _, end in spans)
    selected = [a.c.day, a.c.model_key, a.c.agent_id, *columns]
    query: sa.Select[Any] | sa.CompoundSelect[Any] = sa.select(*selected).where(
        a.c.tenant == tenant, a.c.day >= first, a.c.day < end
    )
    if agents_from is not None and first < agents_from < end:
        # The month before's rows of the month's agents only: an agent's runs are nearly
        # always on one day, so this is a few rows rather than half of them (over a store
        # of a million runs a year, 24,000 rows instead of 48,000; the database checks
        # each day's agent against a set of the month's, in a hash on Postgres and a
        # temporary index on SQLite).
        later = sa.select(a.c.agent_id).where(
            a.c.tenant == tenant, a.c.day >= agents_from, a.c.day < end
        )
        query = sa.union_all(
            sa.select(*selected).where(a.c.tenant == tenant, a.c.day >= agents_from, a.c.day < end),
            sa.select(*selected).where(
                a.c.tenant == tenant,
                a.c.day >= first,
                a.c.day < agents_from,
                a.c.agent_id.in_(later),
            ),
        )
    # The rows as stored, one per (day, agent, model), summed per span here: an agent's
    # runs are nearly always on one day, so nearly every row is a share already, and
    # the database would sort every row to group them (over a month's agents of a store
    # of a million runs a year, 49,000 rows: 85 ms read, 210 ms read and grouped).
    # Each day's span (a day between two spans that do not meet has none).
    span_of = {day: at for at, (first, end) in enumerate(spans) for day in range(first, end)}
    # A row's sums as read (ints on SQLite, digits on Postgres), made ints when its share
    # is made: nearly every key has one row, and only a second row of a key is added up.
    found: dict[tuple[int, str, str], Sequence[Any]] = {}
    for row in session.execute(query):
        at = span_of.get(row[0])
        if at is None:
            continue
        key = (at, row[1], row[2])
        cell = found.get(key)
        # The columns are NOT NULL: int() of each (a float past 2^63 on SQLite, the
        # digits of a NUMERIC on Postgres) is exact.
        if cell is None:
            found[key] = row
        else:
            sums = [int(was) + int(value) for was, value in zip(cell[3:], row[3:], strict=True)]
            found[key] = [*row[:3], *sums]
    return [
        Share(
            at,
            _who(model),
            agent,
            int(c[3]),
            int(c[4]),
            (int(c[5]), int(c[6]), int(c[7]), int(c[8])),
        )
        for (at, model, agent), c in found.items()
    ]


def tenant_shares(session: Session, first_day: int, end_day: int) -> list[tuple[str, Share]]:
    d = run_days
    query = (
        sa.select(d.c.tenant, d.c.day, d.c.model_key, *_sums(d, session.dialect.name))
        .where(d.c.day >= first_day, d.c.day < end_day)
        .group_by(d.c.tenant, d.c.day, d.c.model_key)
    )
    return [
        (tenant, _share(int(day), model, None, sums))
        for tenant, day, model, *sums in session.execute(query)
    ]


def models_seen(session: Session) -> list[ModelUse]:
    d = run_days
    query = (
        sa.select(d.c.model_key, sa.func.min(d.c.day), sa.func.max(d.c.day), sa.func.sum(d.c.runs))
        .where(d.c.model_key != "")
        .group_by(d.c.model_key)
        .order_by(d.c.model_key)
    )
    return [
        ModelUse(model, int(first), int(last), _int(runs))
        for model, first, last, runs in session.execute(query)
    ]
