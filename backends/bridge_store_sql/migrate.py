"""Alembic, driven programmatically over a connection the backend already holds.

The scripts ship as the ``bridge_store_migrations`` package, found with
:mod:`importlib.resources`, so an installed bridge-store needs no alembic.ini and no
source checkout. The caller runs :func:`upgrade` inside a write transaction that
serializes concurrent upgrades (an advisory lock on Postgres, ``BEGIN IMMEDIATE`` on
SQLite), so several servers starting against one empty database agree on one schema.

A database at a revision these scripts do not hold (a newer bridge-store upgraded it,
or it belongs to something else) is refused with a ConfigurationError rather than
handed to alembic, whose "Can't locate revision" would reach the user as a traceback.
"""

from __future__ import annotations

import contextlib
import importlib.resources
from collections.abc import Iterator

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from bridge_store.errors import ConfigurationError

from .tables import VERSION_TABLE

MIGRATIONS_PACKAGE = "bridge_store_migrations"


@contextlib.contextmanager
def _config(connection: Connection | None = None) -> Iterator[Config]:
    resource = importlib.resources.files(MIGRATIONS_PACKAGE)
    # as_file gives alembic the real directory it needs even from a zipped install.
    with importlib.resources.as_file(resource) as location:
        config = Config()
        config.set_main_option("script_location", str(location))
        config.attributes["connection"] = connection
        yield config


def head_revision() -> str:
    with _config() as config:
        head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise RuntimeError(f"{MIGRATIONS_PACKAGE} holds no migrations")
    return head


def revisions() -> list[str]:
    """Every revision the shipped scripts hold, oldest first."""
    with _config() as config:
        walked = ScriptDirectory.from_config(config).walk_revisions()
        return [script.revision for script in reversed(list(walked))]


def check_known(revision: str | None) -> None:
    """Refuse a database at a revision this bridge-store has no script for."""
    if revision is None or revision in revisions():
        return
    raise ConfigurationError(
        f"the database schema is at revision {revision!r}, which this bridge-store does not "
        f"know (its newest is {head_revision()!r}): it was upgraded by a newer bridge-store; "
        f"run that version or a later one"
    )


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade to ``revision`` over ``connection`` (a Database.migrate work function)."""
    check_known(current_revision(connection))
    with _config(connection) as config:
        command.upgrade(config, revision)


def downgrade(connection: Connection, revision: str | None) -> None:
    """Downgrade to ``revision`` (None: no schema at all), like :func:`upgrade`.

    No command runs it; the migration tests prove every revision's way back.
    """
    check_known(current_revision(connection))
    with _config(connection) as config:
        command.downgrade(config, revision or "base")


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None if it was never migrated."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()
