"""Counting Postgres round trips: the writes asyncpg makes to its sockets.

Each round trip asyncpg starts is one write to the connection's transport, so
writes / calls is the round trips per call. Used by the SQL tests and by
``python -m bench sql-append``; it patches asyncpg's private transport, so it stays out of
the product package.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bridge_store_sql.postgres import PostgresDatabase


class WriteCounter:
    """Counts the writes asyncpg makes to the sockets of ``db``'s pooled connections."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.writes = 0
        sa.event.listen(db.engine.sync_engine, "checkout", self._wrap)

    def _wrap(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        transport = dbapi_connection.driver_connection._transport
        if getattr(transport, "counted", False):
            return
        send = transport.write

        def counting_write(data: bytes) -> None:
            self.writes += 1
            send(data)

        transport.write = counting_write
        transport.counted = True

    def per_call(self, calls: int, before: int) -> float:
        """Round trips per call since the count was ``before``."""
        return (self.writes - before) / calls
