"""The overview's counts, from revision 0005's run summaries, 0011's tool counts and
0013's per-day sums.

Three statements over one tenant's runs of a range of days: the runs, failures and
token sums per (day, model) (for a range of whole days, revision 0013's ``run_days``,
a few rows a day, rather than every run), and the durations of the runs that have one (the medians
and 95th percentiles are taken from them by the caller, the same way for every
backend), each a range of the index ``ix_runs_started`` (tenant, started_at, ...);
and the tool calls and failures per (day, model, tool), a range of revision 0011's
``ix_run_tool_days_day`` (tenant, day, model_id, tool, ...), whose rows are each run's
counts with its day and model, grouped in the order it is read (no join, no sort).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bridge_store.backend.statistics import DAY_MS, FAILED, Counts, Duration, ToolCount, Totals

from . import shares
from .statements import Session
from .tables import run_tool_days as c
from .tables import runs as r


def _in_range(tenant: str, since: int, until: int) -> list[sa.ColumnElement[bool]]:
    return [r.c.tenant == tenant, r.c.started_at >= since, r.c.started_at < until]


def _day() -> sa.ColumnElement[Any]:
    # Integer division on both dialects (bigint / bigint); started_at is never negative
    # for a real run, and a run without a time (0) falls on day 0, outside any range.
    return (r.c.started_at // sa.literal(DAY_MS, sa.BigInteger())).label("day")


def totals_query(tenant: str, since: int, until: int) -> sa.Select[Any]:
    day = _day()
    failed = sa.func.sum(sa.case((r.c.status == FAILED, 1), else_=0))
    return (
        sa.select(
            day,
            r.c.model_id,
            sa.func.count(),
            failed,
            sa.func.sum(r.c.input_tokens),
            sa.func.sum(r.c.output_tokens),
            sa.func.sum(r.c.cache_read_tokens),
            sa.func.sum(r.c.cache_write_tokens),
        )
        .where(*_in_range(tenant, since, until))
        .group_by(day, r.c.model_id)
    )


def durations_query(tenant: str, since: int, until: int) -> sa.Select[Any]:
    return sa.select(_day(), r.c.model_id, r.c.duration_ms).where(
        *_in_range(tenant, since, until), r.c.duration_ms.is_not(None)
    )


def tools_query(tenant: str, since: int, until: int) -> sa.Select[Any]:
    # The day bounds make the range of the index; started_at keeps its ends exact for a
    # range that does not start or end at midnight (a count without its run has no
    # row here).
    return (
        sa.select(
            c.c.day, c.c.model_id, c.c.tool, sa.func.sum(c.c.calls), sa.func.sum(c.c.failures)
        )
        .where(
            c.c.tenant == tenant,
            c.c.day >= since // DAY_MS,
            c.c.day <= (until - 1) // DAY_MS,
            c.c.started_at >= since,
            c.c.started_at < until,
        )
        .group_by(c.c.day, c.c.model_id, c.c.tool)
    )


def _int(value: Any) -> int:
    # SUM over bigint is numeric on Postgres (a Decimal here), and NULL over no values.
    return int(value) if value is not None else 0


def count(session: Session, tenant: str, since: int, until: int) -> Counts:
    """Every count of the overview (one unit of work: three statements)."""
    counts = Counts()
    if since % DAY_MS == 0 and until % DAY_MS == 0:
        counts.totals = shares.day_totals(session, tenant, since // DAY_MS, until // DAY_MS)
    else:
        for row in session.execute(totals_query(tenant, since, until)):
            day, model, runs, failed, *tokens = row
            counts.totals.append(
                Totals(int(day), model, _int(runs), _int(failed), *(_int(t) for t in tokens))
            )
    # Both drivers give bigint columns and bigint / bigint as ints: each row is the tuple.
    counts.durations = list(
        map(Duration._make, session.execute(durations_query(tenant, since, until)))
    )
    for day, model, tool, calls, failures in session.execute(tools_query(tenant, since, until)):
        counts.tools.append(ToolCount(int(day), model, tool, _int(calls), _int(failures)))
    return counts
