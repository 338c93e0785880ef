"""Who started it: the name of the token that created each agent and run.

A nullable ``created_by`` column beside ``doc`` in ``agents`` and ``runs``, written by
``create`` only (``update`` leaves it as it is): the document itself is never
changed, so what the bridge reads back is exactly what it stored. Rows from before
this revision have none, which the viewer shows as "unknown". The creator's tenant is
the row's own ``tenant`` (a token only ever writes its own tenant's items).

Adding a nullable column without a default changes no existing row on either dialect
(no table rewrite, no trigger of revision 0003 dropped); dropping it again is native
on SQLite 3.35 and later.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("agents", "runs")


def _name() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("created_by", _name(), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        op.drop_column(table, "created_by")
