"""The reference in-memory backend passes the conformance suite."""

from typing import cast

import pytest

from bridge_store.conformance import LeaseConformance, StoreConformance
from bridge_store.substores import Backend
from bridge_store_memory import MemoryBackend


class TestMemoryBackend(StoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"


class TestMemoryLeases(LeaseConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"

    @pytest.fixture
    def lease_backends(self) -> tuple[Backend, Backend]:
        # Every memory:// URL is a store of its own: two servers share one only in-process.
        backend = cast("Backend", MemoryBackend())
        return backend, backend
