"""Deleting whole agents that have not changed for a while (``bridge-store prune``).

An agent goes with everything it owns, in an order chosen so that a prune stopped at
any point (a crash, a lost lease, a backend outage) leaves nothing the next prune
cannot find: its runs' events first, then its runs, its checkpoint blobs, and the
agent last. While the agent row exists the next pass finds the agent again and
finishes it; its runs are only deleted once their events are, so no event is left
without the run that names it. (The bridge deletes runs before their events; a crash
between the two would leave events that only ``bridge-store gc`` can find.)

Never pruned: an agent whose status is ``running`` or that names an ``activeRunId``,
and an agent with a run that is ``queued`` or ``running`` (CONTRACT.md's run
statuses: ``finished``, ``error``, ``cancelled`` and ``expired`` are final). An agent
is read again right before its deletion starts, so one a bridge touched since it was
listed is left alone.

Every delete goes through the audit log as a CallStore delete does, under the
principal given (``prune`` for the command, ``retention`` for ``serve --retain``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..backend.substores import AgentPosition, BlobRef, RunPosition, run_position
from ..security import audit
from ..security.auth import Principal, Scope
from ..stack.stores import Stores
from ..types import Document
from ..wire.fields import MAX_LIMIT

#: Run statuses that are not final: the run may still write events and checkpoints.
ACTIVE_RUN_STATUSES = frozenset({"queued", "running"})
#: Agent statuses ``--status`` may pick (``running`` agents are never pruned).
PRUNABLE_STATUSES = ("idle", "error", "archived")
#: Ids per delete call: the contract layer's largest page, which every backend takes.
DELETE_BATCH = MAX_LIMIT


@dataclass(frozen=True, slots=True)
class PruneCriteria:
    """Which agents go: last updated before ``cutoff_ms`` (epoch milliseconds), of
    ``cwd`` if given, with one of ``statuses`` if given, in ``tenants`` (None: every
    tenant that has agents)."""

    cutoff_ms: int
    cwd: str | None = None
    statuses: frozenset[str] | None = None
    tenants: Sequence[str] | None = None


@dataclass(slots=True)
class AgentFigures:
    """What one pruned (or, in a dry run, prunable) agent held.

    ``events`` and ``blob_bytes`` are counted in dry runs only: counting them means
    reading every event and blob, which a real prune has no other reason to do.
    """

    tenant: str
    agent_id: str
    cwd: str
    status: str
    updated_at: int
    runs: int = 0
    blobs: int = 0
    events: int | None = None
    blob_bytes: int | None = None


@dataclass(slots=True)
class PruneReport:
    agents: list[AgentFigures] = field(default_factory=list)
    #: Old enough and matching, but with an active run (or touched while pruning).
    skipped_active: int = 0

    @property
    def runs(self) -> int:
        return sum(agent.runs for agent in self.agents)

    @property
    def blobs(self) -> int:
        return sum(agent.blobs for agent in self.agents)

    @property
    def events(self) -> int:
        return sum(agent.events or 0 for agent in self.agents)

    @property
    def blob_bytes(self) -> int:
        return sum(agent.blob_bytes or 0 for agent in self.agents)


#: Asked between agents whether to go on (``serve --retain``: the lease still held).
KeepGoing = Callable[[], Awaitable[bool]]


async def _always() -> bool:
    return True


async def prune(
    stores: Stores,
    criteria: PruneCriteria,
    *,
    principal_name: str,
    dry_run: bool = False,
    keep_going: KeepGoing = _always,
) -> PruneReport:
    """Delete (or with ``dry_run`` only measure) every agent ``criteria`` pick."""
    report = PruneReport()
    tenants = criteria.tenants
    if tenants is None:
        tenants = sorted(await stores.agents.tenants())
    for tenant in tenants:
        principal = Principal(name=principal_name, tenant=tenant, scope=Scope.ADMIN)
        async for agent in _old_agents(stores, tenant, criteria):
            if not await keep_going():
                return report
            figures = await _prune_agent(stores, principal, agent, criteria, dry_run)
            if figures is None:
                report.skipped_active += 1
            else:
                report.agents.append(figures)
    return report


async def _old_agents(
    stores: Stores, tenant: str, criteria: PruneCriteria
) -> AsyncIterator[Document]:
    # List order is updatedAt descending, so the agents old enough are exactly those
    # after the position (cutoff, ""): nothing newer is read at all.
    after: AgentPosition | None = AgentPosition(updated_at=criteria.cutoff_ms, agent_id="")
    while page := await stores.agents.list(tenant, cwd=criteria.cwd, after=after, limit=MAX_LIMIT):
        for agent in page:
            if criteria.statuses is None or agent["status"] in criteria.statuses:
                yield agent
        last = page[-1]
        after = AgentPosition(updated_at=last["updatedAt"], agent_id=last["agentId"])


def _is_active(agent: Document) -> bool:
    return agent.get("status") == "running" or agent.get("activeRunId") is not None


async def agent_runs(stores: Stores, tenant: str, agent_id: str) -> list[Document]:
    """Every run of the agent."""
    runs: list[Document] = []
    after: RunPosition | None = None
    while page := await stores.runs.list(
        tenant, agent_ids=[agent_id], run_ids=None, after=after, limit=MAX_LIMIT
    ):
        runs.extend(page)
        after = run_position(page[-1])
    return runs


async def agent_blobs(stores: Stores, tenant: str, agent_id: str) -> list[BlobRef]:
    """Every checkpoint blob of the agent."""
    refs: list[BlobRef] = []
    after: BlobRef | None = None
    while page := await stores.checkpoints.list(
        tenant, agent_ids=[agent_id], blob_ids=None, after=after, limit=MAX_LIMIT
    ):
        refs.extend(page)
        after = page[-1]
    return refs


async def _prune_agent(
    stores: Stores,
    principal: Principal,
    listed: Document,
    criteria: PruneCriteria,
    dry_run: bool,
) -> AgentFigures | None:
    tenant, agent_id = principal.tenant, listed["agentId"]
    runs = await agent_runs(stores, tenant, agent_id)
    if _is_active(listed) or any(run["status"] in ACTIVE_RUN_STATUSES for run in runs):
        return None
    blobs = await agent_blobs(stores, tenant, agent_id)
    figures = AgentFigures(
        tenant=tenant,
        agent_id=agent_id,
        cwd=listed["cwd"],
        status=listed["status"],
        updated_at=listed["updatedAt"],
        runs=len(runs),
        blobs=len(blobs),
    )
    run_ids = sorted({run["runId"] for run in runs})
    if dry_run:
        figures.events = sum([await count_events(stores, tenant, run_id) for run_id in run_ids])
        figures.blob_bytes = sum([await blob_size(stores, tenant, ref) for ref in blobs])
        return figures
    # Read again: a bridge that resumed the agent since it was listed keeps it.
    fresh = await stores.agents.get(tenant, agent_id)
    if fresh is None or fresh["updatedAt"] != listed["updatedAt"] or _is_active(fresh):
        return None
    for batch in _batches(run_ids):
        await stores.run_events.delete(tenant, batch)
        _audit(principal, "runEvents", {"runIds": batch})
    for batch in _batches(run_ids):
        await stores.runs.delete(tenant, [agent_id], batch)
        _audit(principal, "runs", {"agentIds": [agent_id], "runIds": batch})
    if blobs:
        await stores.checkpoints.delete(tenant, [agent_id], None)
        _audit(principal, "checkpoints", {"agentIds": [agent_id]})
    await stores.agents.delete(tenant, [agent_id], None)
    _audit(principal, "agents", {"agentIds": [agent_id]})
    return figures


def _batches(ids: Sequence[str]) -> list[list[str]]:
    return [list(ids[start : start + DELETE_BATCH]) for start in range(0, len(ids), DELETE_BATCH)]


def _audit(principal: Principal, substore: str, filter_: Document) -> None:
    audit.record(principal, substore, "delete", {"filter": filter_})


async def count_events(stores: Stores, tenant: str, run_id: str) -> int:
    """How many events the run has (read page by page)."""
    count, after = 0, 0
    while page := await stores.run_events.list(tenant, run_id, after_seq=after, limit=MAX_LIMIT):
        count += len(page)
        after = page[-1]["seq"]
    return count


async def blob_size(stores: Stores, tenant: str, ref: BlobRef) -> int:
    """The blob's size as stored (0 if it is gone)."""
    data = await stores.checkpoints.get(tenant, ref.agent_id, ref.blob_id)
    return 0 if data is None else len(data)
