"""Keyset conditions that stay index range scans when a filter pins a sort column.

A list page is "rows whose sort key comes after the cursor's". Written naively as
``(turn_number, run_id, agent_id) > (:t, :r, :a)`` it is correct, but when the query
also filters ``agent_id = :x`` the index that serves the filter,
``(agent_id, turn_number, run_id)``, cannot use that comparison as a range bound and
would read every row of the agent before the cursor. Knowing the pinned column's value,
the comparison reduces to one on the remaining columns, in index order:
``(turn_number, run_id) >= (:t, :r)`` if ``:x > :a``, else ``> (:t, :r)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa


def after(
    columns: Sequence[sa.Column[Any]],
    position: Sequence[Any],
    *,
    pinned: Mapping[str, Any],
    descending: bool = False,
) -> sa.ColumnElement[bool]:
    """Rows strictly after ``position`` in the order of ``columns``.

    ``pinned`` maps column names to the single value a filter fixes them to. The
    comparison is lexicographic: the first column whose value differs decides.
    """
    free: list[sa.ColumnElement[Any]] = []
    values: list[sa.ColumnElement[Any]] = []
    inclusive = False
    for column, value in zip(columns, position, strict=True):
        if column.name in pinned:
            fixed = pinned[column.name]
            if fixed == value:
                continue
            # The pinned column decides ties among the free columns before it.
            inclusive = (fixed > value) != descending
            break
        free.append(column)
        # Typed like the column: an untyped Python int would bind as a 32-bit integer.
        values.append(sa.literal(value, type_=column.type))
    if not free:
        return sa.true() if inclusive else sa.false()
    left = sa.tuple_(*free) if len(free) > 1 else free[0]
    right = sa.tuple_(*values) if len(values) > 1 else values[0]
    if descending:
        return left <= right if inclusive else left < right
    return left >= right if inclusive else left > right
