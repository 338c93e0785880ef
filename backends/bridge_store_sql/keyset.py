"""The keyset condition of a list page: rows strictly after the cursor's sort key.

Written as one row-value comparison, ``(turn_number, run_id, agent_id) > (:t, :r, :a)``,
which both SQLite and Postgres turn into a range bound on the index whose columns are
in that order. With an equality filter on a leading index column (``agent_id = :x``
on ``(agent_id, turn_number, run_id)``) both planners still bound the range with the
comparison's prefix; ``tests/test_postgres_plans.py`` and the SQLite plan test check it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa


def after(
    columns: Sequence[sa.Column[Any]], position: Sequence[Any], *, descending: bool = False
) -> sa.ColumnElement[bool]:
    """Rows after ``position`` in the order of ``columns`` (all ascending or descending)."""
    # Typed like the columns: an untyped Python int would bind as a 32-bit integer.
    values = [
        sa.literal(value, type_=column.type)
        for column, value in zip(columns, position, strict=True)
    ]
    return _beyond(columns, values, descending)


def after_bound(
    columns: Sequence[sa.Column[Any]], names: Sequence[str], *, descending: bool = False
) -> sa.ColumnElement[bool]:
    """:func:`after` with the position left to bind: parameter ``names[i]`` is column i's
    value, so one statement built once serves every cursor."""
    values = [
        sa.bindparam(name, type_=column.type) for column, name in zip(columns, names, strict=True)
    ]
    return _beyond(columns, values, descending)


def _beyond(
    columns: Sequence[sa.Column[Any]], values: Sequence[sa.ColumnElement[Any]], descending: bool
) -> sa.ColumnElement[bool]:
    left, right = sa.tuple_(*columns), sa.tuple_(*values)
    return left < right if descending else left > right
