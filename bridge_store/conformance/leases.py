"""Conformance of a backend's leases (``Backend.acquire_lease`` and ``release_lease``).

Opt in with a class that mixes in :class:`LeaseConformance` and provides
``store_url``. The tests open the store twice, as two servers sharing it would; a
backend whose two opens of one URL do not share data (the in-memory one) overrides
``lease_backends`` to hand the same backend twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pluggy
import pytest

from bridge_store.backend.features import Leases
from bridge_store.backend.plugins import get_plugin_manager, open_backend

#: Long enough that no test outlives it by accident; expiry tests pass their own.
LONG = 60.0


class LeaseConformance:
    """Leases: one holder at a time, renewals, token-checked release, expiry, races."""

    @pytest.fixture
    def plugin_manager(self) -> pluggy.PluginManager:
        return get_plugin_manager()

    @pytest.fixture
    async def lease_backends(
        self, store_url: str, plugin_manager: pluggy.PluginManager
    ) -> AsyncIterator[tuple[Leases, Leases]]:
        """Two started backends on the store at ``store_url``: two servers sharing it."""
        first = open_backend(plugin_manager, store_url)
        second = open_backend(plugin_manager, store_url)
        assert isinstance(first, Leases), "the backend does not implement features.Leases"
        assert isinstance(second, Leases)
        await first.start(migrate=True)
        try:
            await second.start(migrate=True)
            try:
                yield first, second
            finally:
                await second.close()
        finally:
            await first.close()

    async def test_one_holder_at_a_time_and_renewals(
        self, lease_backends: tuple[Leases, Leases]
    ) -> None:
        one, two = lease_backends
        assert await one.acquire_lease("retention", "server-a", LONG) is True
        assert await two.acquire_lease("retention", "server-b", LONG) is False
        assert await one.acquire_lease("retention", "server-b", LONG) is False
        # The holder renews, from either backend object of its server.
        assert await one.acquire_lease("retention", "server-a", LONG) is True
        # Leases of other names are independent.
        assert await two.acquire_lease("other-job", "server-b", LONG) is True
        await one.release_lease("other-job", "server-b")

    async def test_release_frees_it_and_checks_the_holder(
        self, lease_backends: tuple[Leases, Leases]
    ) -> None:
        one, two = lease_backends
        assert await one.acquire_lease("retention", "server-a", LONG) is True
        # Not the holder: nothing changes.
        await two.release_lease("retention", "server-b")
        await two.release_lease("never-taken", "server-b")
        assert await two.acquire_lease("retention", "server-b", LONG) is False
        await one.release_lease("retention", "server-a")
        assert await two.acquire_lease("retention", "server-b", LONG) is True
        # The first holder's late release leaves the new holder's lease alone.
        await one.release_lease("retention", "server-a")
        assert await one.acquire_lease("retention", "server-a", LONG) is False
        await two.release_lease("retention", "server-b")

    async def test_a_lease_not_renewed_expires(self, lease_backends: tuple[Leases, Leases]) -> None:
        one, two = lease_backends
        assert await one.acquire_lease("retention", "server-a", 0.5) is True
        assert await two.acquire_lease("retention", "server-b", LONG) is False
        await asyncio.sleep(1.5)
        assert await two.acquire_lease("retention", "server-b", LONG) is True
        # The first holder's renewal comes too late: the lease is the other's now.
        assert await one.acquire_lease("retention", "server-a", LONG) is False
        await one.release_lease("retention", "server-a")
        assert await one.acquire_lease("retention", "server-c", LONG) is False
        await two.release_lease("retention", "server-b")

    async def test_of_many_racing_for_a_free_lease_exactly_one_wins(
        self, lease_backends: tuple[Leases, Leases]
    ) -> None:
        one, two = lease_backends
        for round_ in range(3):
            contenders = [(one if n % 2 else two, f"server-{round_}-{n}") for n in range(8)]
            won = await asyncio.gather(
                *(backend.acquire_lease("race", holder, LONG) for backend, holder in contenders)
            )
            assert sum(won) == 1, won
            winner = contenders[won.index(True)]
            await winner[0].release_lease("race", winner[1])
