"""Statements compiled once and sent by the driver: shapes, arguments, rows, failures."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import pysqlite

from bridge_store_sql import statements
from bridge_store_sql.sqlite import SqliteSession
from bridge_store_sql.statements import Compiler

metadata = sa.MetaData()
items = sa.Table(
    "items",
    metadata,
    sa.Column("k", sa.Text(), primary_key=True),
    sa.Column("n", sa.BigInteger(), nullable=False),
)
_BY_KEY = sa.select(items.c.n).where(items.c.k == sa.bindparam("b_k"))
_PAGE = sa.select(items.c.k).order_by(items.c.k).limit(sa.bindparam("b_limit"))


@pytest.fixture
def session() -> Iterator[SqliteSession]:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE items (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
    try:
        yield SqliteSession(Compiler(pysqlite.dialect()), connection)
    finally:
        connection.close()


def test_a_statement_built_once_is_compiled_once() -> None:
    compiler = Compiler(postgresql.asyncpg.dialect())  # type: ignore[no-untyped-call]
    first = compiler.bind(_BY_KEY, {"b_k": "a"})
    second = compiler.bind(_BY_KEY, {"b_k": "b"})
    assert first.sql is second.sql  # the same compiled text, found by identity
    assert "$1" in first.sql
    assert (list(first.args), list(second.args)) == (["a"], ["b"])
    assert first.returns_rows


def test_values_bound_at_build_time_are_sent_too(session: SqliteSession) -> None:
    # SQLite's LIMIT comes with an OFFSET the compiler binds itself.
    session.execute(sa.insert(items), [{"k": f"k{n}", "n": n} for n in range(5)])
    assert session.scalars(_PAGE, {"b_limit": 2}).all() == ["k0", "k1"]
    assert session.scalar(_BY_KEY, {"b_k": "k3"}) == 3


def test_statements_built_per_call_expand_their_lists(session: SqliteSession) -> None:
    session.execute(sa.insert(items), [{"k": f"k{n}", "n": n} for n in range(5)])
    chosen = sa.select(items.c.n).where(items.c.k.in_(["k1", "k4"])).order_by(items.c.n)
    assert session.scalars(chosen).all() == [1, 4]
    result = session.execute(sa.update(items).where(items.c.n > 2).values(n=0))
    assert result.rowcount == 2


def test_text_without_columns_still_returns_its_rows(session: SqliteSession) -> None:
    assert session.execute(sa.text("SELECT 1 + 1")).scalar_one() == 2


def test_a_driver_failure_is_sqlalchemys_error_without_parameters(
    session: SqliteSession,
) -> None:
    insert = sa.insert(items)
    session.execute(insert, {"k": "secret-key", "n": 1})
    with pytest.raises(sa.exc.IntegrityError) as caught:
        session.execute(insert, {"k": "secret-key", "n": 2})
    assert "secret-key" not in str(caught.value)


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(statements, "CACHE_SIZE", 3)
    compiler = Compiler(pysqlite.dialect())
    built = [sa.select(items.c.n).where(items.c.k == sa.bindparam("b_k")) for _ in range(10)]
    for statement in built:
        compiler.bind(statement, {"b_k": "x"})
    assert len(compiler._shapes) == 3
