"""INSERT ... ON CONFLICT, which SQLite and Postgres spell the same way."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def dialect_insert(conn: sa.Connection, table: sa.Table) -> Any:
    """The dialect's INSERT construct (the one with ``on_conflict_*``)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def insert_if_absent(conn: sa.Connection, table: sa.Table, row: dict[str, Any]) -> bool:
    """Insert ``row`` unless its primary key exists; True if it was inserted.

    One statement, and the database's uniqueness check decides: of several racing
    creates of one id exactly one inserts, whichever process they come from.
    """
    result = conn.execute(dialect_insert(conn, table).values(row).on_conflict_do_nothing())
    return result.rowcount == 1
