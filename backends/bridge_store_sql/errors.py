"""Driver failures translated into the Connect errors a client can act on.

An outage (server down, connection lost, pool exhausted, lock wait exceeded) is
``unavailable``, which clients treat as "retry later"; a value the database refuses to
store (a NUL character in a Postgres text column, a lone surrogate) is
``invalid_argument``. Anything else is a bug and is left to surface as ``internal``.
"""

from __future__ import annotations

from typing import NoReturn

import sqlalchemy.exc as sa_exc

from bridge_store.errors import (
    BackendUnreachable,
    ConfigurationError,
    ConnectError,
    invalid_argument,
    unavailable,
)

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


# -- start-up --------------------------------------------------------------------------

#: SQLSTATEs a server answers a login with, and what to do about each.
_LOGIN_REFUSED = ("28P01", "28000")  # invalid_password, invalid_authorization_specification
_NO_DATABASE = "3D000"  # invalid_catalog_name
_STARTING_UP = ("57P03",)  # cannot_connect_now: starting up, shutting down, recovering
#: invalid_schema_name: no schema of the URL's search_path exists to create tables in.
_NO_SCHEMA = "3F000"


def startup_error(where: str, error: BaseException) -> ConfigurationError:
    """What stops the start of the store ``where`` (its redacted URL), with the fix.

    ``error`` is what starting it raised: a ConnectError (its cause is the driver's
    error) or the driver's error itself. A server that could not be reached gives a
    :class:`~bridge_store.errors.BackendUnreachable`, which may mend itself.
    """
    cause = error.__cause__ if isinstance(error, ConnectError) and error.__cause__ else error
    original = cause.orig if isinstance(cause, sa_exc.DBAPIError) else cause
    state = _sqlstate(cause) if isinstance(cause, sa_exc.DBAPIError) else None
    reason = (
        str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
    )
    if state in _LOGIN_REFUSED:
        return ConfigurationError(
            f"{where} refused the login ({reason}): check the user and password in the store URL"
        )
    if state == _NO_DATABASE:
        return ConfigurationError(
            f"{where}: {reason}: create it (createdb) or fix the database name in the store URL"
        )
    if state == _NO_SCHEMA:
        return ConfigurationError(
            f"{where}: {reason}: create the schema that search_path names (CREATE SCHEMA) "
            "or fix search_path in the store URL"
        )
    if state in _STARTING_UP or isinstance(original, OSError | TimeoutError):
        what = type(original).__name__ if isinstance(original, TimeoutError) else reason
        return BackendUnreachable(
            f"cannot reach {where} ({what}): is the database server running, and are the "
            "host and port in the store URL right?"
        )
    if isinstance(original, Exception) and "unable to open database file" in reason:
        return ConfigurationError(
            f"cannot open {where} ({reason}): check that this user may write the file and "
            "its directory (SQLite puts -wal and -shm files next to it)"
        )
    if isinstance(original, Exception) and "readonly database" in reason:
        return ConfigurationError(
            f"{where} is read-only ({reason}): give this user write permission on it"
        )
    message = error.message if isinstance(error, ConnectError) else reason
    return ConfigurationError(f"cannot start the store at {where}: {message}")
