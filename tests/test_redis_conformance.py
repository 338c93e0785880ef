"""The Redis backend passes the conformance suite on the machine's Redis."""

import pytest

from bridge_store.conformance import ExportQueueConformance, LeaseConformance, StoreConformance
from tests.support.redis import MakeRedisUrl

pytestmark = pytest.mark.redis


class TestRedisBackend(StoreConformance):
    @pytest.fixture
    def store_url(self, make_redis_url: MakeRedisUrl) -> str:
        return make_redis_url()


class TestRedisBackendWithRetention(StoreConformance):
    """Retention changes when logs expire, never what a client sees before that."""

    @pytest.fixture
    def store_url(self, make_redis_url: MakeRedisUrl) -> str:
        return make_redis_url(run_events_ttl="3600")


class TestRedisLeases(LeaseConformance):
    @pytest.fixture
    def store_url(self, make_redis_url: MakeRedisUrl) -> str:
        return make_redis_url()


class TestRedisExportQueue(ExportQueueConformance):
    @pytest.fixture
    def store_url(self, make_redis_url: MakeRedisUrl) -> str:
        return make_redis_url()
