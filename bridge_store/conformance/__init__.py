"""The contract conformance suite, written once and run against every backend.

A backend opts in by subclassing :class:`StoreConformance` in a test module and
providing a ``store_url`` fixture that yields the URL of a fresh, empty store for each
test (its own database, key prefix or bucket prefix)::

    class TestMyBackend(StoreConformance):
        @pytest.fixture
        def store_url(self, tmp_path):
            return f"mystore://{tmp_path}"

A backend that provides only some substores subclasses only their mixins
(:class:`AgentConformance`, :class:`RunConformance`, :class:`RunEventConformance`,
:class:`CheckpointConformance`); the in-memory reference backend serves the others.
A backend with leases (``Backend.acquire_lease``, for ``serve --retain``) also mixes in
:class:`LeaseConformance`, and one with an export queue (``serve --export-runs``)
:class:`ExportQueueConformance`. Override the ``plugin_manager`` fixture to test a backend
that is not installed as an entry point. Input validation is the contract layer's, the
same for every backend, so it is tested once in bridge-store's own tests, not here.

The suite talks to the backend through the contract layer exactly as the server does
(``bridge_store.rpc.dispatch.call_store``), so what it checks is what a client sees.
Third-party backends run it the same way: it ships inside the package.
Requires pytest and pytest-asyncio (``asyncio_mode = "auto"``).
"""

from .agents import AgentConformance
from .checkpoints import CheckpointConformance
from .events import RunEventConformance
from .export_queue import ExportQueueConformance
from .leases import LeaseConformance
from .runs import RunConformance
from .suite import StoreConformance

__all__ = [
    "AgentConformance",
    "CheckpointConformance",
    "ExportQueueConformance",
    "LeaseConformance",
    "RunConformance",
    "RunEventConformance",
    "StoreConformance",
]
