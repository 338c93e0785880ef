"""How units of work run on each dialect, and the rules they run by.

The substores describe their work as a plain function over a :class:`.statements.Session`
(a driver connection with the part of SQLAlchemy's ``Connection`` API they use) and
pick how it runs:

- :meth:`Database.read` - one statement (a consistent snapshot by itself), without
  BEGIN/COMMIT round trips; retried once on a connection that turns out to be dead.
- :meth:`Database.write` - on Postgres a single self-contained statement in autocommit
  (one round trip); ``atomic=True`` wraps several statements in a transaction. On
  SQLite every write is a ``BEGIN IMMEDIATE`` transaction on the one writer thread,
  serialized across processes by SQLite's own lock and ``busy_timeout``, so
  "database is locked" only ever means a writer held the lock past the timeout.
- :meth:`Database.migrate` and :meth:`Database.inspect` - alembic's work, over a
  SQLAlchemy ``Connection``: schema upgrades, and reading the schema's revision.

How the work reaches the database differs: on Postgres it runs on the event loop
(:mod:`.postgres`); on SQLite, whose calls block, the whole unit of work runs in one
hop to a worker thread (:mod:`.sqlite`). Going through aiosqlite instead cost a thread hop per
statement, BEGIN and COMMIT included: nine per append, 2.6 ms of CPU in all, against
about 0.3 ms then (bench/sql_append.py).

Failures leave as :class:`~bridge_store.errors.ConnectError` (see :mod:`.errors`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Literal, TypeVar

import sqlalchemy as sa

from bridge_store.backend.substores import PoolStats

from .statements import Session

T = TypeVar("T")
#: A unit of database work: statements over one connection, returning their result.
Work = Callable[[Session], T]
#: Schema work (alembic) over a SQLAlchemy connection.
SchemaWork = Callable[[sa.Connection], T]

#: Key of the Postgres advisory lock that serializes schema upgrades: the first 8 bytes
#: of sha1("bridge-store migrations") as a signed bigint, unlikely to collide with the
#: keys of another application sharing the database.
MIGRATION_LOCK_KEY = -6994241787615015080


class Database(abc.ABC):
    """The engines and the rules for running work on them."""

    dialect: Literal["sqlite", "postgresql"]

    def __init__(self, description: str) -> None:
        self.description = description

    @abc.abstractmethod
    async def start(self) -> None:
        """Create the engines (connections are made on first use)."""

    def require_existing(self) -> None:
        """For a start without migration (reading, serving ``--no-migrate``): a
        database that does not exist is a ConfigurationError, and nothing is created.
        A server's database always exists; a file's may not (SQLite overrides this)."""
        return None  # a Postgres database is found (or not) by connecting to it

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every pooled connection."""

    @abc.abstractmethod
    async def read(self, work: Work[T], *, what: str) -> T:
        """Run ``work``, one read statement, outside any transaction."""

    @abc.abstractmethod
    async def write(
        self, work: Work[T], *, what: str, atomic: bool, retry: bool, doc_bytes: int | None = None
    ) -> T:
        """Run ``work`` as one write.

        ``retry``: the work may run twice with the same result as once (an update, a
        delete, an append carrying an idempotency key), so a connection found dead
        mid-call is replaced and the work repeated instead of failing the call.
        ``doc_bytes``: the size of the one document the work writes, where the caller
        knows it; a backend may run a small write more directly (SQLite, on the loop).
        """

    @abc.abstractmethod
    async def migrate(self, work: SchemaWork[T], *, what: str) -> T:
        """Run schema work with every other migrating process locked out."""

    @abc.abstractmethod
    async def inspect(self, work: SchemaWork[T], *, what: str) -> T:
        """Run a read of the schema (its revision) outside any transaction."""

    @abc.abstractmethod
    def pool_stats(self) -> PoolStats | None:
        """The connection pools now (None before start)."""
