"""Alembic migrations for the SQL backend."""
