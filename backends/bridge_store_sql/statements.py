"""SQLAlchemy Core statements, compiled once per shape and run on the driver's connection.

SQLAlchemy stays the schema, the statement builder and alembic's model; what it no
longer does is execute the hot path. Through its asyncio adapter a call cost about
400 us of CPU against 88 us for the same query sent by asyncpg itself (the Connection,
the adapted cursor, the result machinery and a greenlet per call); on SQLite the
Connection and Result layers cost more than a small statement. So a unit of work gets
a :class:`Session` over the raw driver connection, with the part of SQLAlchemy's
``Connection`` API the substores use (``execute``, ``scalar``, ``scalars`` and their
results), and each statement reaches the driver as the SQL text and positional
arguments SQLAlchemy's own compiler produces for that dialect.

Statements built once with bound parameters (the substores' module constants) are
compiled on first use and found again by identity; the driver then finds its prepared
statement by the same text (asyncpg's statement cache, sqlite3's). The agents and runs
lists are built once per shape (``list_statement``). A statement built per call (a
delete, a list filtered by many ids) is compiled per call: those are the rare calls.

The tables' column types (text, bigint, bytes) need no conversion on either driver,
so rows are the driver's own (asyncpg ``Record``, sqlite3 tuples): read by index or
unpacked, not by attribute.
"""

from __future__ import annotations

import abc
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

Params: TypeAlias = Mapping[str, Any]
#: A row as the driver returns it: indexable and iterable.
Row: TypeAlias = Sequence[Any]

#: Statements kept compiled per Compiler. The module constants are a few dozen; the
#: bound keeps a statement built per call and passed with parameters from growing it.
CACHE_SIZE = 256


_ROWS_TEXT = re.compile(r"^\s*(SELECT|WITH|VALUES|PRAGMA)\b|\bRETURNING\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Bound:
    """One statement as its driver takes it."""

    sql: str
    #: Positional arguments; a list of them for ``executemany``.
    args: Sequence[Any] | list[Sequence[Any]]
    returns_rows: bool
    many: bool = False


@dataclass(frozen=True, slots=True)
class _Shape:
    statement: Any  # held so its id() is not reused while the entry lives
    compiled: SQLCompiler
    names: tuple[str, ...]
    #: Values bound when the statement was built (SQLite's ``OFFSET 0``, a literal).
    defaults: dict[str, Any]
    processors: tuple[Callable[[Any], Any] | None, ...]
    returns_rows: bool
    #: IN lists or literal-execute values: the SQL text is finished per call.
    expands: bool


class Compiler:
    """Compiles statements for one dialect and turns parameters into driver arguments."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._shapes: dict[tuple[int, tuple[str, ...]], _Shape] = {}
        #: SQLite's worker threads share the cache: a miss updates it under the lock.
        self._lock = threading.Lock()

    def bind(self, statement: sa.Executable, params: Params | Sequence[Params] | None) -> Bound:
        if params is None:
            return self._bind_once(statement)
        if isinstance(params, Mapping):
            shape = self._shape(statement, tuple(params))
            return Bound(shape.compiled.string, self._args(shape, params), shape.returns_rows)
        rows = list(params)
        shape = self._shape(statement, tuple(rows[0]))
        args = [self._args(shape, row) for row in rows]
        return Bound(shape.compiled.string, args, returns_rows=False, many=True)

    def _shape(self, statement: Any, keys: tuple[str, ...]) -> _Shape:
        key = (id(statement), keys)
        shape = self._shapes.get(key)
        if shape is not None and shape.statement is statement:
            return shape
        compiled = statement.compile(dialect=self.dialect, column_keys=list(keys))
        processors = compiled._bind_processors
        names = tuple(compiled.positiontup or ())
        shape = _Shape(
            statement,
            compiled,
            names,
            {name: compiled.binds[name].effective_value for name in names},
            tuple(processors.get(name) for name in names),
            _returns_rows(statement, compiled),
            bool(compiled.post_compile_params or compiled.literal_execute_params),
        )
        with self._lock:
            if len(self._shapes) >= CACHE_SIZE:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[key] = shape
        return shape

    @staticmethod
    def _args(shape: _Shape, params: Params) -> Sequence[Any]:
        if shape.expands:
            raise ValueError("a statement with IN lists is built per call, without params")
        defaults = shape.defaults
        values = (params[name] if name in params else defaults[name] for name in shape.names)
        return [
            value if processor is None else processor(value)
            for value, processor in zip(values, shape.processors, strict=True)
        ]

    def _bind_once(self, statement: Any) -> Bound:
        compiled = statement.compile(dialect=self.dialect)
        state = compiled.construct_expanded_state(escape_names=False)
        args = [
            value if (processor := state.processors.get(name)) is None else processor(value)
            for name, value in zip(
                state.positiontup or (), state.positional_parameters, strict=True
            )
        ]
        return Bound(state.statement, args, _returns_rows(statement, compiled))


def _returns_rows(statement: Any, compiled: SQLCompiler) -> bool:
    if getattr(statement, "is_select", False) or compiled.effective_returning:
        return True
    # Text without .columns() says nothing of its rows: its SQL does.
    return isinstance(statement, sa.TextClause) and bool(_ROWS_TEXT.search(compiled.string))


class ScalarResult:
    """The first column of each row."""

    def __init__(self, rows: list[Row]) -> None:
        self._values = [row[0] for row in rows]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def all(self) -> list[Any]:
        return list(self._values)

    def first(self) -> Any:
        return self._values[0] if self._values else None


class Result:
    """What a statement gave: its rows (all fetched) and the rows it changed."""

    def __init__(self, rows: list[Row], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def all(self) -> list[Row]:
        return list(self.rows)

    def first(self) -> Row | None:
        return self.rows[0] if self.rows else None

    def one(self) -> Row:
        if len(self.rows) != 1:
            raise sa.exc.NoResultFound(f"expected one row, got {len(self.rows)}")
        return self.rows[0]

    def one_or_none(self) -> Row | None:
        if len(self.rows) > 1:
            raise sa.exc.MultipleResultsFound(f"expected at most one row, got {len(self.rows)}")
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalar_one_or_none(self) -> Any:
        row = self.one_or_none()
        return None if row is None else row[0]

    def scalars(self) -> ScalarResult:
        return ScalarResult(self.rows)


class Session(abc.ABC):
    """One driver connection, for the statements of one unit of work."""

    def __init__(self, compiler: Compiler) -> None:
        self._compiler = compiler

    @property
    def dialect(self) -> Dialect:
        return self._compiler.dialect

    def execute(
        self, statement: sa.Executable, params: Params | Sequence[Params] | None = None
    ) -> Result:
        """Run ``statement``: ``params`` for a statement built once, a list of them for many."""
        return self.run(self._compiler.bind(statement, params))

    def scalar(self, statement: sa.Executable, params: Params | None = None) -> Any:
        return self.execute(statement, params).scalar()

    def scalars(self, statement: sa.Executable, params: Params | None = None) -> ScalarResult:
        return self.execute(statement, params).scalars()

    @abc.abstractmethod
    def run(self, bound: Bound) -> Result:
        """Send one bound statement to the driver; its failures as SQLAlchemy's DBAPIError."""
