"""The SQL backend on Postgres: the conformance suite in a database of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge_store.conformance import StoreConformance
from tests.support.postgres import execute, fetch

pytestmark = pytest.mark.postgres

TABLES = ("agents", "runs", "run_events", "run_event_counters", "checkpoint_blobs")


@pytest.fixture(scope="module")
def conformance_database(make_postgres_url: Callable[[], str]) -> str:
    return make_postgres_url()


class TestPostgresBackend(StoreConformance):
    @pytest.fixture
    def store_url(self, conformance_database: str) -> str:
        # One database for the module, emptied before each test: creating a database
        # per test would cost more than the tests themselves.
        migrated = fetch(conformance_database, "SELECT to_regclass('agents') IS NOT NULL")[0][0]
        if migrated:
            execute(conformance_database, f"TRUNCATE {', '.join(TABLES)}")
        return conformance_database
