"""The SQL backend's schema history: alembic revisions of ``bridge_store_sql.tables``.

It lives at the top of the repository (the project's layout keeps it there) and ships
as its own package, ``bridge_store_migrations``, but it belongs to the SQL backend:
``env.py`` migrates ``bridge_store_sql.tables.metadata``, and
``bridge_store_sql.migrate`` finds this package as a resource and runs it. A change to
``tables.py`` needs a revision in ``versions/``.
"""
