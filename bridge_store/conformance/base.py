"""What every conformance mixin shares: how the store under test is opened.

Each mixin tests one substore. The substores a test class does not test are served
by the in-memory reference backend (``memory://``), so a backend that provides only
some substores (which :class:`~bridge_store.backend.substores.Backend` allows) runs only the
mixins for those.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

import pluggy
import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import SubstoreName
from bridge_store.stack.stores import Routes, open_stores

from .harness import StoreClient

#: Serves the substores a test class does not test.
REFERENCE_URL = "memory://"


class ConformanceBase:
    """Opens the store at the ``store_url`` fixture (which the test class provides)."""

    #: The substore a mixin tests (None on this base and on compositions).
    substore: ClassVar[SubstoreName | None] = None

    @classmethod
    def substores_under_test(cls) -> set[SubstoreName]:
        """The substores of every mixin this class is made of."""
        return {name for klass in cls.__mro__ if (name := vars(klass).get("substore")) is not None}

    @classmethod
    def routes(cls, store_url: str) -> Routes:
        """``store_url`` for the tested substores, the reference backend for the rest."""
        tested = cls.substores_under_test()

        def url(name: SubstoreName) -> str:
            return store_url if name in tested else REFERENCE_URL

        return Routes(
            agents=url("agents"),
            runs=url("runs"),
            run_events=url("runEvents"),
            checkpoints=url("checkpoints"),
        )

    @pytest.fixture
    def plugin_manager(self) -> pluggy.PluginManager:
        """The plugin manager that opens ``store_url``: every installed backend.

        Override it to test a backend that is not installed as an entry point, e.g.
        ``get_plugin_manager(plugins=[MyPlugin()])``.
        """
        return get_plugin_manager()

    @pytest.fixture
    async def client(
        self, store_url: str, plugin_manager: pluggy.PluginManager
    ) -> AsyncIterator[StoreClient]:
        opened = await open_stores(plugin_manager, self.routes(store_url), migrate=True)
        try:
            yield StoreClient(stores=opened.stores, manager=plugin_manager)
        finally:
            await opened.close()
