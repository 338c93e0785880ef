"""The backend API: what a storage backend implements, and what it builds with.

A backend implements :class:`Backend` and the substore protocols, and may implement
the optional features of :mod:`bridge_store.backend.features`. Besides this
module it needs only :mod:`bridge_store.errors` (the errors it raises),
:mod:`bridge_store.wire.jsontext` (how documents become bytes) and ``hookimpl`` (from
:mod:`bridge_store`) to register.

The contract layer (:mod:`bridge_store.rpc.contract`) validates every request before it
reaches a backend, so implementations receive well-typed arguments and only decide how
to store them. Backends report the contract's errors by raising
:class:`~bridge_store.errors.ConnectError` (``already_exists``, ``not_found``) and
outages as ``unavailable``.

Every substore method takes ``tenant`` first: the tenant of the token that made the
call (a name matching :data:`bridge_store.backend.tenants.TENANT_PATTERN`, already checked).
Items of different tenants are independent: the same agent id or run id in two
tenants are two items, and no method may read, list, change or delete another
tenant's items, whatever its filter (an empty delete filter means every item *of the
tenant*). Tenant ``default`` holds everything stored before tenants existed, so a
backend should keep its pre-tenant layout for it. ``tenants()`` lists the tenants
that hold items, for administrative commands that walk every tenant.

Who started it: ``create`` of agents and runs also receives ``creator``, the name of
the token that made the call (its tenant is the item's own), or None when nobody is
known (copies, imports). The backend keeps it *beside* the document, never in it: what
``get`` and ``list`` return stays exactly the document the client stored. ``update``
keeps it, deleting the item forgets it, and ``creators`` reads it back for the history
viewer; items stored without one (and everything from before) are simply absent there.

Listing is keyset pagination: the contract layer passes the sort key of the last item
the client has seen (``after``) and asks for ``limit`` items strictly after it. That is
what keeps cursors correct while rows change between pages: a row that is not modified
is returned exactly once, whatever happens to its neighbours.
"""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from ..errors import ConnectError, already_exists, invalid_argument
from ..types import Document

SubstoreName: TypeAlias = Literal["agents", "runs", "runEvents", "checkpoints"]
SUBSTORE_NAMES: tuple[SubstoreName, ...] = ("agents", "runs", "runEvents", "checkpoints")

#: Seconds one wait on a backend may take by default (``serve --backend-timeout``).
DEFAULT_BACKEND_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """What the server asks of every backend; a backend's URL parameters override it.

    ``timeout``: seconds any one wait on the backend may take (opening a connection,
    waiting for a pooled one, one statement, command or request) before the call fails
    with ``unavailable``, so that a dead or unreachable backend answers within about
    that long instead of holding calls for as long as the network takes to give up.
    """

    timeout: float = DEFAULT_BACKEND_TIMEOUT

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"the backend timeout must be a positive number, not {self.timeout}")

    def tcp_keepalive(self) -> dict[int, int]:
        """TCP options (level ``IPPROTO_TCP``) that find a dead peer within the timeout.

        Keepalive probes start after ``timeout`` idle seconds, so a pooled connection
        to a backend that vanished (a partition drops packets; nothing is refused) is
        found dead before a call waits on it; ``TCP_USER_TIMEOUT`` closes a connection
        whose sent data goes unacknowledged for ``timeout``. Options the platform lacks
        are left out; set ``SO_KEEPALIVE`` as well.
        """
        seconds = max(1, math.ceil(self.timeout))
        wanted = {
            "TCP_KEEPIDLE": seconds,
            "TCP_KEEPINTVL": max(1, seconds // 3),
            "TCP_KEEPCNT": 3,
            "TCP_USER_TIMEOUT": seconds * 1000,
        }
        return {
            getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)
        }


@dataclass(frozen=True, slots=True)
class AgentPosition:
    """Sort key of an agent in list order: ``updatedAt`` desc, then ``agentId`` desc."""

    updated_at: int
    agent_id: str


@dataclass(frozen=True, slots=True)
class RunPosition:
    """Sort key of a run in list order: ``turnNumber``, ``runId``, then ``agentId``, ascending.

    ``agentId`` breaks ties between runs of different agents that share a run id, since
    a run is identified by the pair.
    """

    turn_number: int
    run_id: str
    agent_id: str


@dataclass(frozen=True, slots=True, order=True)
class BlobRef:
    """A checkpoint blob's identity, which is also its sort key: ``blobId``, ``agentId``."""

    blob_id: str
    agent_id: str


def agent_position(agent: Document) -> AgentPosition:
    """Where ``agent`` sorts in list order."""
    return AgentPosition(updated_at=agent["updatedAt"], agent_id=agent["agentId"])


def run_position(run: Document) -> RunPosition:
    """Where ``run`` sorts in list order."""
    return RunPosition(turn_number=run["turnNumber"], run_id=run["runId"], agent_id=run["agentId"])


def stored_event(event: Document, seq: int) -> Document:
    """The stored form of an appended event: its fields in the bridge's own order."""
    offset = str(seq)
    # Merged in C; a key already there keeps its place when its value is replaced.
    ordered: Document = {"runId": event["runId"], "seq": seq, "offset": offset, **event}
    if "seq" in event or "offset" in event:  # the store's to assign, whatever came in
        ordered["seq"] = seq
        ordered["offset"] = offset
    return ordered


def appended_event(event: Document) -> Document:
    """A stored event as an append receives it: without ``seq`` and ``offset``."""
    return {key: value for key, value in event.items() if key not in ("seq", "offset")}


class AgentStore(Protocol):
    async def get(self, tenant: str, agent_id: str) -> Document | None:
        """The stored agent document, or None."""

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        """Store a new agent and return it; ``already_exists`` if its id is taken.

        ``creator`` is kept beside the document (see the module docstring)."""

    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        """Who created these agents: agent id -> creator, for those that have one."""

    async def update(self, tenant: str, agent: Document) -> Document:
        """Replace an existing agent whole and return it; ``not_found`` if absent."""

    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        """Delete agents matching every given criterion; None means "any"."""

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        """Up to ``limit`` agents after ``after`` in list order, optionally of one cwd."""

    async def tenants(self) -> Sequence[str]:
        """Every tenant that has agents, in any order."""


class RunStore(Protocol):
    async def get(self, tenant: str, agent_id: str, run_id: str) -> Document | None:
        """The stored run document, or None."""

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        """Store a new run; ``already_exists`` if (agentId, runId) is taken.

        ``creator`` is kept beside the document (see the module docstring)."""

    async def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """Who created these (agentId, runId) runs: -> creator, for those that have one."""

    async def update(self, tenant: str, run: Document) -> Document:
        """Replace an existing run whole; ``not_found`` if absent."""

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> None:
        """Delete runs matching every given criterion; None means "any"."""

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        """Up to ``limit`` runs after ``after`` in list order, filtered as given."""

    async def tenants(self) -> Sequence[str]:
        """Every tenant that has runs, in any order."""


class RunEventStore(Protocol):
    async def append(self, tenant: str, event: Document) -> Document:
        """Append ``event`` to the log of ``event["runId"]`` and return it as stored.

        ``event`` holds every field but ``seq`` and ``offset``; the backend assigns the
        next seq of the run (1, 2, 3 ... with no gaps, even when appends race from
        several processes) and builds the stored document with :func:`stored_event`.
        When ``event["idempotencyKey"]`` is not None and the run already has an event
        with that key, the backend returns that event unchanged and appends nothing.
        """

    async def list(self, tenant: str, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        """Up to ``limit`` events of the run with seq > ``after_seq``, ascending."""

    async def delete(self, tenant: str, run_ids: Sequence[str] | None) -> None:
        """Delete the logs of the given runs; None means every run."""

    async def tenants(self) -> Sequence[str]:
        """Every tenant that has run events, in any order."""

    def run_ids(self, tenant: str) -> AsyncIterator[Sequence[str]]:
        """The ids of the runs that have events, in pages, in any order (for ``gc``).

        A run whose log exists throughout is listed at least once; one appended to or
        deleted meanwhile may or may not be.
        """

    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        """Store events of run ``run_id`` exactly as another store holds them; how many.

        For copying and restoring history (``bridge-store copy``, ``import``), never
        called by the bridge. ``events`` are stored documents (as :meth:`list` returns
        them) with consecutive seqs. Those whose seq the run already holds are left as
        they are: the caller compares them. The others are stored verbatim, with their
        ``seq``, ``offset``, ``createdAt`` and ``idempotencyKey``, and later appends
        continue after the highest seq. They must continue the log: the first seq not
        yet held must be the run's last seq + 1 (``invalid_argument`` otherwise, since
        a log has no gaps), and an idempotency key the run holds at another seq is
        ``already_exists``; either way nothing is stored. :func:`restorable` checks
        the arguments.
        """


def check_restore(run_id: str, events: Sequence[Document]) -> None:
    """Raise ``invalid_argument`` unless ``events`` suit :meth:`RunEventStore.restore`:
    stored events of run ``run_id`` with consecutive seqs and distinct idempotency keys."""
    for index, event in enumerate(events):
        if event.get("runId") != run_id:
            raise invalid_argument(f"restore: an event of another run than {run_id}")
        seq = event.get("seq")
        if seq != events[0]["seq"] + index or event.get("offset") != str(seq) or seq < 1:
            raise invalid_argument(f"restore: run {run_id}'s events are not consecutive")
    keys = [e["idempotencyKey"] for e in events if e.get("idempotencyKey") is not None]
    if len(keys) != len(set(keys)):
        raise invalid_argument(f"restore: two of run {run_id}'s events have one idempotency key")


def restorable(run_id: str, events: Sequence[Document], last_seq: int) -> list[Document]:
    """The events of a :meth:`RunEventStore.restore` call that are new to a log ending at
    ``last_seq``, checked by :func:`check_restore`; ``invalid_argument`` if they would
    leave a gap."""
    check_restore(run_id, events)
    new = [event for event in events if event["seq"] > last_seq]
    if new and new[0]["seq"] != last_seq + 1:
        raise invalid_argument(gap(run_id, last_seq, new[0]["seq"]))
    return new


def gap(run_id: str, last_seq: int, seq: int) -> str:
    return f"restore: run {run_id} ends at seq {last_seq}; seq {seq} would leave a gap"


def duplicate_key(run_id: str, key: str) -> ConnectError:
    """The error of a restore that would give one idempotency key two events."""
    return already_exists(f"restore: run {run_id} already holds idempotency key {key!r}")


class CheckpointStore(Protocol):
    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        """The blob's bytes, or None."""

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        """Store a new blob; ``already_exists`` if present."""

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        """Replace an existing blob; ``not_found`` if absent."""

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        """Delete blobs matching every given criterion; None means "any"."""

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        """Up to ``limit`` blob refs after ``after``, ordered by (blobId, agentId)."""

    async def tenants(self) -> Sequence[str]:
        """Every tenant that has blobs, in any order."""


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A backend's connection pool at one instant, for the metrics.

    ``size``: connections the pool may hold; ``in_use``: checked out now; ``waits``:
    checkouts since start that found every connection in use and had to wait, or None
    when the pool cannot tell.
    """

    size: int
    in_use: int
    waits: int | None = None


class Backend(Protocol):
    """One storage URL, opened: provides one or more substores.

    A substore attribute is None when the backend does not implement it. The server
    calls :meth:`start` once before serving and :meth:`close` once at shutdown. What
    a backend may add (a readiness probe, pool figures, leases, a search index, its
    own run list and counts) is in :mod:`bridge_store.backend.features`.
    """

    agents: AgentStore | None
    runs: RunStore | None
    run_events: RunEventStore | None
    checkpoints: CheckpointStore | None

    async def start(self, *, migrate: bool) -> None:
        """Connect, and bring the schema to the latest version when ``migrate``."""

    async def close(self) -> None:
        """Release connections; in-flight calls have finished."""

    async def upgrade_schema(self) -> None:
        """Bring the schema to the latest version (no-op for schemaless stores)."""

    async def schema_revision(self) -> str | None:
        """The current schema version, or None for schemaless stores."""
