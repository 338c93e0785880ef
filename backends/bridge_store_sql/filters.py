"""``column IN (ids)`` for id lists of any length, and the tenants a table holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from .statements import Session

#: Up to this many ids are bound one parameter each, which keeps the statement text
#: (and so its prepared statement) the same from call to call. Longer lists are written
#: into the SQL text: both drivers cap one statement at 32767 parameters.
BOUND_IDS_LIMIT = 1000


def one_of(column: sa.Column[Any], values: Sequence[str]) -> sa.ColumnElement[bool]:
    if len(values) <= BOUND_IDS_LIMIT:
        return column.in_(values)
    inlined: sa.BindParameter[list[str]] = sa.bindparam(
        f"{column.name}_list", list(values), expanding=True, literal_execute=True
    )
    return column.in_(inlined)


def tenants_of(table: sa.Table) -> Callable[[Session], list[str]]:
    """A read listing the distinct tenants of ``table`` (its key's first column)."""
    statement = sa.select(table.c.tenant).distinct()

    def work(conn: Session) -> list[str]:
        return list(conn.scalars(statement))

    return work
