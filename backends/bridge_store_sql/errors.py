"""Driver failures translated into the Connect errors a client can act on.

An outage (server down, connection lost, pool exhausted, lock wait exceeded) is
``unavailable``, which clients treat as "retry later"; a value the database refuses to
store (a NUL character in a Postgres text column, a lone surrogate) is
``invalid_argument``. Anything else is a bug and is left to surface as ``internal``.
"""

from __future__ import annotations

from typing import NoReturn

import sqlalchemy.exc as sa_exc

from bridge_store.errors import ConnectError, invalid_argument, unavailable

#: SQLSTATE classes that mean "the database cannot serve right now": connection
#: exception, invalid authorization (a rotated password), database gone, insufficient
#: resources, operator intervention (shutdown, cancelled statement), system error; and
#: the two transaction rollbacks a retry resolves.
_TRANSIENT_SQLSTATE_CLASSES = ("08", "28", "3D", "53", "57", "58")
_TRANSIENT_SQLSTATES = ("40001", "40P01")
#: undefined_table: the schema was never migrated (``serve --no-migrate``).
_MISSING_TABLE_SQLSTATE = "42P01"
_SCHEMA_HINT = "the database schema is missing or old: run `bridge-store db upgrade`"
#: SQLSTATE classes 22, data exception (a value the column cannot hold), and 54, program
#: limit exceeded (an index entry over Postgres' B-tree limit of about 2.7 KB: the
#: contract's key limits keep clients below it; this is for callers that skip them).
_DATA_SQLSTATE_CLASSES = ("22", "54")

#: SQLite reports contention and I/O trouble as OperationalError with these messages.
_SQLITE_TRANSIENT = ("database is locked", "database is busy", "disk i/o error", "unable to open")


def _sqlstate(error: sa_exc.DBAPIError) -> str | None:
    code = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return code if isinstance(code, str) else None


def is_disconnect(error: BaseException) -> bool:
    """Whether ``error`` means the connection died (another connection may succeed)."""
    return isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated


def translate(error: BaseException, what: str) -> ConnectError | None:
    """The ConnectError for ``error`` raised while doing ``what``, or None if unexpected."""
    if isinstance(error, ConnectError):
        return error
    if isinstance(error, UnicodeEncodeError):
        return invalid_argument(f"{what}: a string holds characters that cannot be stored")
    if isinstance(error, sa_exc.TimeoutError):
        return unavailable(f"{what}: no database connection free (pool timeout)")
    if isinstance(error, (OSError, TimeoutError)):
        return unavailable(f"{what}: database unreachable ({type(error).__name__}: {error})")
    if not isinstance(error, sa_exc.DBAPIError):
        return None
    if error.connection_invalidated:
        return unavailable(f"{what}: lost the database connection")
    state = _sqlstate(error)
    if state is not None:
        if state.startswith(_TRANSIENT_SQLSTATE_CLASSES) or state in _TRANSIENT_SQLSTATES:
            return unavailable(f"{what}: database unavailable ({state}: {error.orig})")
        if state.startswith(_DATA_SQLSTATE_CLASSES):
            return invalid_argument(f"{what}: the database refused a value ({error.orig})")
        if state == _MISSING_TABLE_SQLSTATE:
            return unavailable(f"{what}: {_SCHEMA_HINT}")
        return None
    if isinstance(error, sa_exc.OperationalError):
        message = str(error.orig).lower()
        if any(fragment in message for fragment in _SQLITE_TRANSIENT):
            return unavailable(f"{what}: database busy ({error.orig})")
        if message.startswith("no such table"):
            return unavailable(f"{what}: {_SCHEMA_HINT}")
    return None


def reraise(error: Exception, what: str) -> NoReturn:
    """Raise ``error`` as its ConnectError, or unchanged when it is unexpected (a bug)."""
    translated = translate(error, what)
    if translated is None:
        raise error
    raise translated from error
