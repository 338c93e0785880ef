"""Store URLs the SQL backend accepts, parsed into connection settings.

SQLite: ``sqlite:///relative.db`` or ``sqlite:////abs/path.db``, with an optional
``busy_timeout`` in milliseconds.

Postgres: ``postgresql://``, ``postgres://`` or ``postgresql+asyncpg://`` URLs. The pool
and timeout parameters below are taken out of the query; everything else (``sslmode``,
``sslrootcert``, ``sslcert``, ``sslkey``, ``application_name``...) stays in the DSN that
asyncpg parses itself, the way libpq would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from bridge_store.backend.substores import DEFAULT_BACKEND_TIMEOUT
from bridge_store.errors import ConfigurationError
from bridge_store.urls import redact

SQLITE_SCHEMES = ("sqlite",)
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+asyncpg")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SqliteSettings:
    path: Path
    #: How long a writer waits for another process's write transaction to finish.
    busy_timeout_ms: int = 30_000
    #: Reader connections; writes always go through one connection.
    read_pool_size: int = 4


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """Where and how to connect; ``dsn`` is a plain ``postgresql://`` URL for asyncpg."""

    dsn: str
    #: Connections kept open. No overflow by default: a connection opened for a burst
    #: and closed when returned costs 12-24 ms (TLS negotiation included) and its
    #: statements are prepared again; calls beyond the pool wait for a free connection,
    #: which on a busy server is no slower (bench load, 16 connections: 60 distinct
    #: Postgres backends in 4 s with 5 + 5, 16 with a fixed pool).
    pool_size: int = 10
    max_overflow: int = 0
    #: Seconds to wait for a free pooled connection before answering ``unavailable``.
    #: This and the two timeouts below default to the server's backend timeout
    #: (``serve --backend-timeout``, 5 s), so that a dead or partitioned database gives
    #: ``unavailable`` within about that long.
    pool_timeout: float = DEFAULT_BACKEND_TIMEOUT
    #: Replace connections older than this many seconds (-1: never).
    pool_recycle: int = 1800
    #: Ping every connection on checkout. Off by default: it doubles the round trips of
    #: every call; connections closed while idle are caught without it.
    pool_pre_ping: bool = False
    connect_timeout: float = DEFAULT_BACKEND_TIMEOUT
    #: Seconds one statement may run before it is cancelled (``unavailable``). The
    #: largest checkpoint (95 MiB) took 2.0-3.1 s to write here on loopback at load
    #: average 8: raise it for stores reached over slow links.
    command_timeout: float = DEFAULT_BACKEND_TIMEOUT


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return number


def _non_negative_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")
    return number


def _recycle(name: str, value: str) -> int:
    return -1 if value.strip() == "-1" else _positive_int(name, value)


def _seconds(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
    return number


def _boolean(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be true or false, got {value!r}")


#: Query parameters the backend consumes; the rest go to asyncpg in the DSN.
_OWN_PARAMETERS = frozenset(
    {
        "pool_size",
        "max_overflow",
        "pool_timeout",
        "pool_recycle",
        "pool_pre_ping",
        "connect_timeout",
        "command_timeout",
    }
)


def _query(query: str, url_for_errors: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"cannot parse the query of {url_for_errors}") from None
    result: dict[str, str] = {}
    for key, value in pairs:
        if key in result:
            raise ConfigurationError(f"{key} is given twice in {url_for_errors}")
        result[key] = value
    return result


def parse_sqlite(url: str) -> SqliteSettings:
    parts = urlsplit(url)
    if parts.netloc:
        raise ConfigurationError(
            f"{redact(url)}: a SQLite URL has no host; use sqlite:///relative.db or "
            "sqlite:////absolute/path.db"
        )
    # urlsplit keeps the leading slash of the path: "/relative.db" or "//abs/path.db".
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if path in ("", ":memory:"):
        raise ConfigurationError(
            f"{redact(url)}: name a database file (sqlite:///agents.db); for a throwaway store "
            "use memory://"
        )
    params = _query(parts.query, redact(url))
    for key in params:
        if key != "busy_timeout":
            raise ConfigurationError(
                f"{redact(url)}: unknown parameter {key!r} (known: busy_timeout)"
            )
    if "busy_timeout" in params:
        busy_timeout = _non_negative_int("busy_timeout", params["busy_timeout"])
        return SqliteSettings(path=Path(path), busy_timeout_ms=busy_timeout)
    return SqliteSettings(path=Path(path))


def _take(params: Mapping[str, str], name: str, parse: Callable[[str, str], T], default: T) -> T:
    return parse(name, params[name]) if name in params else default


def parse_postgres(url: str, timeout: float = DEFAULT_BACKEND_TIMEOUT) -> PostgresSettings:
    """The URL's settings; ``timeout`` is the default of the three timeouts it omits."""
    parts = urlsplit(url)
    params = _query(parts.query, redact(url))
    passthrough = {key: value for key, value in params.items() if key not in _OWN_PARAMETERS}
    dsn = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(passthrough), parts.fragment)
    )
    defaults = PostgresSettings(
        dsn="", pool_timeout=timeout, connect_timeout=timeout, command_timeout=timeout
    )
    return PostgresSettings(
        dsn=dsn,
        pool_size=_take(params, "pool_size", _positive_int, defaults.pool_size),
        max_overflow=_take(params, "max_overflow", _non_negative_int, defaults.max_overflow),
        pool_timeout=_take(params, "pool_timeout", _seconds, defaults.pool_timeout),
        pool_recycle=_take(params, "pool_recycle", _recycle, defaults.pool_recycle),
        pool_pre_ping=_take(params, "pool_pre_ping", _boolean, defaults.pool_pre_ping),
        connect_timeout=_take(params, "connect_timeout", _seconds, defaults.connect_timeout),
        command_timeout=_take(params, "command_timeout", _seconds, defaults.command_timeout),
    )
