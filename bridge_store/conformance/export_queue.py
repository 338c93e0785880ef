"""Conformance of a backend's export queue (``features.ExportQueue``, for ``serve
--export-runs``).

Opt in with a class that mixes in :class:`ExportQueueConformance` and provides
``store_url``. The tests open the store twice, as two servers sharing it would; a
backend whose two opens of one URL do not share data (the in-memory one) overrides
``queue_backends`` to hand the same backend twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pluggy
import pytest

from bridge_store.backend.features import ExportQueue, QueuedRun
from bridge_store.backend.plugins import get_plugin_manager, open_backend

from .harness import longest_key


class ExportQueueConformance:
    """The queue: oldest first, exact unqueues, requeues that survive, every tenant."""

    @pytest.fixture
    def plugin_manager(self) -> pluggy.PluginManager:
        return get_plugin_manager()

    @pytest.fixture
    async def queue_backends(
        self, store_url: str, plugin_manager: pluggy.PluginManager
    ) -> AsyncIterator[tuple[ExportQueue, ExportQueue]]:
        """Two started backends on the store at ``store_url``: two servers sharing it."""
        first = open_backend(plugin_manager, store_url)
        second = open_backend(plugin_manager, store_url)
        assert isinstance(first, ExportQueue), "the backend does not implement ExportQueue"
        assert isinstance(second, ExportQueue)
        await first.start(migrate=True)
        try:
            await second.start(migrate=True)
            try:
                yield first, second
            finally:
                await second.close()
        finally:
            await first.close()

    async def test_runs_come_out_oldest_first_from_every_server(
        self, queue_backends: tuple[ExportQueue, ExportQueue]
    ) -> None:
        one, two = queue_backends
        assert await one.queued_runs(10) == []
        assert await one.queued_count() == 0
        late = QueuedRun(3_000, "default", "agent-1", "run-3")
        early = QueuedRun(1_000, "team-b", "agent-2", "run-1")
        tie_b = QueuedRun(2_000, "team-b", "agent-1", "run-2")
        tie_a = QueuedRun(2_000, "default", "agent-9", "run-9")
        await one.queue_runs([late, early])
        await two.queue_runs([tie_b, tie_a])
        assert await two.queued_runs(10) == [early, tie_a, tie_b, late]
        assert await one.queued_runs(2) == [early, tie_a]
        assert await one.queued_count() == 4
        await one.queue_runs([])
        assert await two.queued_count() == 4

    async def test_unqueue_removes_exactly_what_was_taken(
        self, queue_backends: tuple[ExportQueue, ExportQueue]
    ) -> None:
        one, two = queue_backends
        first = QueuedRun(1_000, "default", "agent-1", "run-1")
        second = QueuedRun(1_500, "default", "agent-1", "run-2")
        await one.queue_runs([first, second])
        taken = await two.queued_runs(1)
        assert taken == [first]
        # The run ends again (another update) after it was taken, before it is unqueued.
        again = QueuedRun(2_000, "default", "agent-1", "run-1")
        await one.queue_runs([again])
        await two.unqueue_runs(taken)
        assert await one.queued_runs(10) == [second, again]
        # Entries no longer queued, and never queued, are ignored.
        await one.unqueue_runs([first, QueuedRun(5, "default", "agent-7", "run-7")])
        await one.unqueue_runs([second, again])
        assert await two.queued_runs(10) == []
        assert await two.queued_count() == 0

    async def test_a_run_queued_twice_is_taken_once_at_its_later_time_or_twice(
        self, queue_backends: tuple[ExportQueue, ExportQueue]
    ) -> None:
        one, two = queue_backends
        first = QueuedRun(1_000, "default", "agent-1", "run-1")
        later = QueuedRun(4_000, "default", "agent-1", "run-1")
        await one.queue_runs([first])
        await two.queue_runs([later])
        taken = await one.queued_runs(10)
        assert taken in ([later], [first, later])
        await two.unqueue_runs(taken)
        assert await one.queued_runs(10) == []

    async def test_the_same_ids_in_two_tenants_are_two_entries(
        self, queue_backends: tuple[ExportQueue, ExportQueue]
    ) -> None:
        one, two = queue_backends
        ours = QueuedRun(1_000, "default", "agent-1", "run-1")
        theirs = QueuedRun(1_000, "team-b", "agent-1", "run-1")
        await one.queue_runs([ours, theirs])
        assert await two.queued_runs(10) == [ours, theirs]
        await two.unqueue_runs([theirs])
        assert await one.queued_runs(10) == [ours]
        await one.unqueue_runs([ours])

    async def test_the_longest_ids_and_times_the_contract_allows(
        self, queue_backends: tuple[ExportQueue, ExportQueue]
    ) -> None:
        one, two = queue_backends
        agent_id, run_id = longest_key(1), longest_key(2)
        runs = [
            QueuedRun(2**53, "default", agent_id, run_id),
            QueuedRun(0, "default", "agent é ✓ 🚀", 'run "quoted" / slashed \\ %2F'),
        ]
        await one.queue_runs(runs)
        assert await two.queued_runs(10) == sorted(runs)
        await two.unqueue_runs(runs)
        assert await one.queued_count() == 0
