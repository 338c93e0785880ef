"""Alembic environment for the SQL backend (``bridge_store_sql``): its tables' history.

Only ever run programmatically (``bridge_store_sql.migrate``): the caller opens a
connection, takes whatever lock keeps concurrent upgrades apart, begins the transaction
and hands the connection in through ``config.attributes["connection"]``. There is no
alembic.ini and no offline mode.
"""

from __future__ import annotations

from alembic import context

from bridge_store_sql.tables import VERSION_TABLE, metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    # The caller's transaction (BEGIN IMMEDIATE on SQLite) wraps the whole upgrade, so
    # a failed migration leaves the previous revision behind, on SQLite too.
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
