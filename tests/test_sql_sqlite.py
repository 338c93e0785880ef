"""The SQL backend on SQLite: the conformance suite, plus what only SQLite has."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge_store.conformance import StoreConformance


class TestSqliteBackend(StoreConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/store.db"
