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

from bisect import bisect_right
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


def agent_shares(session: Session, tenant: str, spans: Sequence[Span]) -> list[Share]:
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
    query = sa.select(a.c.day, a.c.model_key, a.c.agent_id, *columns).where(
        a.c.tenant == tenant,
        a.c.day >= min(first for first, _ in spans),
        a.c.day < max(end for _, end in spans),
    )
    # The rows as stored, one per (day, agent, model), summed per span here: an agent's
    # runs are nearly always on one day, so nearly every row is a share already, and
    # the database would sort every row to group them (over a month's agents of a store
    # of a million runs a year, 49,000 rows: 85 ms read, 210 ms read and grouped).
    starts = [first for first, _ in spans]
    found: dict[tuple[int, str, str], list[int]] = {}
    # The columns are NOT NULL: int() of each (a float past 2^63 on SQLite, the digits
    # of a NUMERIC on Postgres) is exact.
    for day, model, agent, runs, failed, *tokens in session.execute(query):
        at = bisect_right(starts, day) - 1
        if at < 0 or day >= spans[at][1]:
            continue  # a day between two spans that do not meet
        key = (at, model, agent)
        cell = found.get(key)
        if cell is None:
            found[key] = [int(runs), int(failed), *map(int, tokens)]
        else:
            for n, value in enumerate((runs, failed, *tokens)):
                cell[n] += int(value)
    return [
        Share(at, _who(model), agent, c[0], c[1], (c[2], c[3], c[4], c[5]))
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
