"""What a backend may implement besides :mod:`bridge_store.backend.substores`: each optional
feature is a small protocol, checked with ``isinstance`` where it is used.

A backend without one still serves every call; what the feature adds is named with
each protocol. On the backend (the object ``bridge_store_open_backend`` returns):

- :class:`ReadinessProbe`: ``/readyz`` asks it; without it, ``schema_revision``.
- :class:`PoolFigures`: the connection pool's figures in the metrics.
- :class:`Leases`: ``serve --retain`` needs it (one server of a fleet prunes at a time).
- :class:`ExportQueue`: ``serve --export-runs`` needs it on the runs' backend, with
  :class:`Leases` (ended runs wait there until one server has sent them).

On a substore (each checks that it covers the agents and runs substores it is asked
about, so a mix of backends falls back to scanning):

- :class:`SearchIndex` (run events): the viewer's search narrowed by an index.
- :class:`~bridge_store.backend.history.RunHistory` (runs): the run list across agents.
- :class:`~bridge_store.backend.statistics.RunStatistics` (runs): the overview's counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .history import RunHistory
from .statistics import RunStatistics
from .substores import AgentPosition, PoolStats

__all__ = [
    "Candidates",
    "ExportQueue",
    "Leases",
    "PoolFigures",
    "PoolStats",
    "QueuedRun",
    "ReadinessProbe",
    "RunHistory",
    "RunStatistics",
    "SearchIndex",
]


@runtime_checkable
class ReadinessProbe(Protocol):
    async def readiness(self) -> str | None:
        """None when the backend can serve calls now; otherwise why not, in one line.

        A cheap probe (one round trip: ``SELECT``, ``PING``, one small read) that
        also checks what calls need besides a connection, such as a schema at the
        latest revision. The server bounds it with the backend timeout and reports a
        raised :class:`~bridge_store.errors.ConnectError` by its message, so an
        outage may simply raise ``unavailable``. Never put a secret in the answer: it
        is served without auth on ``/readyz``. Without it the server calls
        ``schema_revision`` and counts an answer as ready.
        """


@runtime_checkable
class PoolFigures(Protocol):
    def pool_stats(self) -> PoolStats | None:
        """The connection pool now, for the metrics; None without a pool.

        Called when metrics are scraped, from the event loop: it must not block.
        """


@runtime_checkable
class Leases(Protocol):
    async def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Take, or renew, the lease ``name`` for ``holder``; whether ``holder`` holds it now.

        A lease is how one server of a fleet sharing this backend gets to do a job
        alone (``serve --retain``). It is free, or held by one holder until that holder
        releases it or ``seconds`` pass without a renewal (so a holder that died frees
        it by itself). Taking it succeeds when it is free or expired, and when
        ``holder`` already holds it, which renews it for ``seconds`` from now; it fails
        (False) while another holder's lease runs. Two holders racing for a free lease,
        from any processes, cannot both win. ``name`` and ``holder`` are short strings
        of letters, digits and ``-_.:``. A backend may also end a lease when its
        holder's connection ends (a Postgres advisory lock).
        """

    async def release_lease(self, name: str, holder: str) -> None:
        """Free the lease ``name`` if ``holder`` holds it; otherwise change nothing.

        Checked against the holder, so a holder whose lease expired and was taken by
        another never frees the other's.
        """


@dataclass(frozen=True, slots=True, order=True)
class QueuedRun:
    """A run waiting to be exported, and when it was queued (this server's epoch ms).

    Ordered as the queue hands them out: oldest first, then by tenant, agent and run.
    ``tenant`` matches ``TENANT_PATTERN``; the ids are the run's (storable keys).
    """

    queued_ms: int
    tenant: str
    agent_id: str
    run_id: str


@runtime_checkable
class ExportQueue(Protocol):
    """A queue of ended runs kept in the store, for ``serve --export-runs``.

    Every server of a fleet queues the runs its clients end; the one holding the
    export lease (:class:`Leases`) takes the oldest, sends them, and unqueues what was
    sent. Kept in the store, the queue outlives a collector outage and a restart.
    Entries of every tenant share the one queue.
    """

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        """Add ``runs``. A run queued again (its status written again) either replaces
        its entry's ``queued_ms`` or gets a second entry; either way, unqueuing the entry
        taken before leaves the run queued, so what changed since is sent too."""

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        """Up to ``limit`` queued runs, in :class:`QueuedRun` order (oldest first)."""
        ...

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        """Remove these entries, each only while it is queued with that ``queued_ms``;
        entries not queued (any more) are ignored."""

    async def queued_count(self) -> int:
        """How many entries are queued now."""
        ...


#: What an index answers: agents in list order (``updatedAt``, ``agentId`` descending)
#: and, for each, the ids of its runs (by turn) whose events hold every term.
Candidates = list[tuple[AgentPosition, list[str]]]


@runtime_checkable
class SearchIndex(Protocol):
    """What a backend's run-events substore implements to narrow searches with a
    full-text index of its own (see ``bridge_store_sql.search``).

    ``terms`` are lowercase ASCII letters and digits; an agent is a candidate if its
    name has a word starting with every term, or if one of its runs has, for every
    term, an event of user or assistant text with a word starting with it. The index
    may name more than match (the viewer checks each); it must not miss one, except as
    documented in docs/viewer.md. Only ``tenant``'s items, after ``after``, ``limit``.
    """

    def indexes(self, agents: object, runs: object) -> bool:
        """Whether these agents and runs substores are the ones the index covers."""
        ...

    async def search_candidates(
        self, tenant: str, terms: Sequence[str], *, after: AgentPosition | None, limit: int
    ) -> Candidates: ...
