"""The SQL backend: SQLite (the embedded default) and Postgres.

SQLAlchemy Core builds the statements, the drivers (sqlite3, asyncpg) send them.

``sqlite:///relative.db``, ``sqlite:////abs/path.db``;
``postgresql://user@host/db`` (also ``postgres://``, ``postgresql+asyncpg://``, with
pool parameters in the query, see :mod:`bridge_store_sql.settings`). The schema is
managed by the alembic migrations shipped in ``bridge_store_migrations``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bridge_store import hookimpl
from bridge_store.backend.substores import BackendOptions

from .settings import POSTGRES_SCHEMES, SQLITE_SCHEMES, parse_postgres, parse_sqlite

if TYPE_CHECKING:
    from .backend import SqlBackend


@hookimpl
def bridge_store_url_schemes() -> list[str]:
    return [*SQLITE_SCHEMES, *POSTGRES_SCHEMES]


@hookimpl
def bridge_store_open_backend(url: str, options: BackendOptions) -> SqlBackend | None:
    scheme = urlsplit(url).scheme
    if scheme not in SQLITE_SCHEMES and scheme not in POSTGRES_SCHEMES:
        return None
    # SQLAlchemy and alembic load only when a SQL URL is chosen: every other command
    # and backend starts without them.
    from .backend import SqlBackend
    from .postgres import PostgresDatabase
    from .sqlite import SqliteDatabase

    if scheme in SQLITE_SCHEMES:
        return SqlBackend(SqliteDatabase(parse_sqlite(url)))
    return SqlBackend(PostgresDatabase(parse_postgres(url, options.timeout), options))
