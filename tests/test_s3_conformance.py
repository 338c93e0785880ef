"""The S3 backend passes the conformance suite on S3 alone (moto, see tests/support/s3.py)."""

import pytest

from bridge_store.conformance import ExportQueueConformance, LeaseConformance, StoreConformance
from tests.support.s3 import MakeS3Url

pytestmark = pytest.mark.s3


class TestS3Backend(StoreConformance):
    @pytest.fixture
    def store_url(self, make_s3_url: MakeS3Url) -> str:
        return make_s3_url()


class TestS3Leases(LeaseConformance):
    @pytest.fixture
    def store_url(self, make_s3_url: MakeS3Url) -> str:
        return make_s3_url()


class TestS3ExportQueue(ExportQueueConformance):
    @pytest.fixture
    def store_url(self, make_s3_url: MakeS3Url) -> str:
        return make_s3_url()
