"""The contract conformance suite, written once and run against every backend.

A backend opts in by subclassing :class:`StoreConformance` in a test module and
providing a ``store_url`` fixture that yields the URL of a fresh, empty store for each
test (its own database, key prefix or bucket prefix)::

    class TestMyBackend(StoreConformance):
        @pytest.fixture
        def store_url(self, tmp_path):
            return f"mystore://{tmp_path}"

The suite talks to the backend through the contract layer exactly as the server does
(``bridge_store.dispatch.call_store``), so what it checks is what a client sees.
Third-party backends run it the same way: it ships inside the package.
Requires pytest and pytest-asyncio (``asyncio_mode = "auto"``).
"""

from .suite import StoreConformance

__all__ = ["StoreConformance"]
