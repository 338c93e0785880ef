"""The reference in-memory backend passes the conformance suite."""

import pytest

from bridge_store.conformance import StoreConformance


class TestMemoryBackend(StoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
