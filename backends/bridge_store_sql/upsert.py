"""INSERT ... ON CONFLICT, which SQLite and Postgres spell the same way."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .statements import Session


@functools.cache
def _insert_or_nothing(dialect: str, table: sa.Table) -> Any:
    # Built once: the row's values are bound at execution, so SQLAlchemy compiles the
    # statement once and finds it in its cache by identity instead of rebuilding and
    # re-keying a new construct on every call (most of the CPU of a small insert).
    insert = postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
    return insert.on_conflict_do_nothing()


def insert_if_absent(conn: Session, table: sa.Table, row: dict[str, Any]) -> bool:
    """Insert ``row`` unless its primary key exists; True if it was inserted.

    One statement, and the database's uniqueness check decides: of several racing
    creates of one id exactly one inserts, whichever process they come from.
    """
    result = conn.execute(_insert_or_nothing(conn.dialect.name, table), row)
    return result.rowcount == 1
