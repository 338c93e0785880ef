"""Finding and deleting orphans (``bridge-store gc``).

An orphan is an item whose owner is gone: checkpoint blobs of an agent that does not
exist, runs of an agent that does not exist, and the events of a run id no run of the
tenant has. The bridge never leaves them (it writes an agent before its runs and a run
before its events, and deletes them all), but a crash in the middle of the bridge's
own deletion, an interrupted copy or a third-party writer can.

Each tenant (of any substore: a tenant may hold nothing but orphans) is walked in the
order that lets one pass find everything: blobs, then runs, then events, since the
events of a run deleted as an orphan are orphans too (a dry run counts them as such).
Every delete is audit-logged as a CallStore delete is. Ids only are kept in memory
(each agent id once, to ask whether it exists once), never documents or blobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..backend.substores import BlobRef, RunPosition, run_position
from ..security import audit
from ..security.auth import Principal, Scope
from ..stack.stores import Stores
from ..types import Document
from ..wire.fields import MAX_LIMIT
from .prune import blob_size, count_events

#: Run ids per existence check (a runs.list filtered by them).
CHECK_BATCH = 100


@dataclass(slots=True)
class TenantOrphans:
    """The orphans of one tenant. ``events``/``blob_bytes`` are counted in dry runs."""

    tenant: str
    #: Agent id -> its orphaned blob ids.
    blobs: dict[str, list[str]] = field(default_factory=dict)
    #: Agent id -> the run ids of its orphaned runs.
    runs: dict[str, list[str]] = field(default_factory=dict)
    #: Run ids whose events are orphans.
    event_logs: list[str] = field(default_factory=list)
    events: int = 0
    blob_bytes: int = 0


@dataclass(slots=True)
class GcReport:
    tenants: list[TenantOrphans] = field(default_factory=list)

    @property
    def blobs(self) -> int:
        return sum(len(ids) for t in self.tenants for ids in t.blobs.values())

    @property
    def runs(self) -> int:
        return sum(len(ids) for t in self.tenants for ids in t.runs.values())

    @property
    def event_logs(self) -> int:
        return sum(len(t.event_logs) for t in self.tenants)

    @property
    def events(self) -> int:
        return sum(t.events for t in self.tenants)

    @property
    def blob_bytes(self) -> int:
        return sum(t.blob_bytes for t in self.tenants)


async def all_tenants(stores: Stores) -> list[str]:
    """Every tenant holding anything in any substore."""
    found: set[str] = set()
    found.update(await stores.agents.tenants())
    found.update(await stores.runs.tenants())
    found.update(await stores.run_events.tenants())
    found.update(await stores.checkpoints.tenants())
    return sorted(found)


async def collect_garbage(
    stores: Stores,
    *,
    dry_run: bool = False,
    tenants: Sequence[str] | None = None,
    principal_name: str = "gc",
) -> GcReport:
    """Delete (or with ``dry_run`` only find and count) the orphans of ``tenants``
    (default: every tenant)."""
    report = GcReport()
    for tenant in tenants if tenants is not None else await all_tenants(stores):
        principal = Principal(name=principal_name, tenant=tenant, scope=Scope.ADMIN)
        orphans = await _tenant_orphans(stores, principal, dry_run)
        if orphans.blobs or orphans.runs or orphans.event_logs:
            report.tenants.append(orphans)
    return report


class _Agents:
    """Whether agents of one tenant exist, each asked once."""

    def __init__(self, stores: Stores, tenant: str) -> None:
        self._stores = stores
        self._tenant = tenant
        self._known: dict[str, bool] = {}

    async def exists(self, agent_id: str) -> bool:
        known = self._known.get(agent_id)
        if known is None:
            known = await self._stores.agents.get(self._tenant, agent_id) is not None
            self._known[agent_id] = known
        return known


async def _tenant_orphans(stores: Stores, principal: Principal, dry_run: bool) -> TenantOrphans:
    tenant = principal.tenant
    orphans = TenantOrphans(tenant)
    agents = _Agents(stores, tenant)
    await _find_blobs(stores, orphans, agents)
    for agent_id, blob_ids in orphans.blobs.items():
        if dry_run:
            for blob_id in blob_ids:
                orphans.blob_bytes += await blob_size(stores, tenant, BlobRef(blob_id, agent_id))
        elif await stores.agents.get(tenant, agent_id) is None:  # still gone
            for batch in _batches(blob_ids):
                await stores.checkpoints.delete(tenant, [agent_id], batch)
                _audit(principal, "checkpoints", {"agentIds": [agent_id], "blobIds": batch})
    await _find_runs(stores, orphans, agents)
    for agent_id, run_ids in orphans.runs.items():
        if not dry_run and await stores.agents.get(tenant, agent_id) is None:
            for batch in _batches(run_ids):
                await stores.runs.delete(tenant, [agent_id], batch)
                _audit(principal, "runs", {"agentIds": [agent_id], "runIds": batch})
    # In a dry run the orphaned runs are still there, but their events count as orphans.
    gone = {run_id for run_ids in orphans.runs.values() for run_id in run_ids}
    async for page in stores.run_events.run_ids(tenant):
        for start in range(0, len(page), CHECK_BATCH):
            batch = sorted(set(page[start : start + CHECK_BATCH]))
            living = await _existing_runs(stores, tenant, batch) - gone
            orphans.event_logs.extend(run_id for run_id in batch if run_id not in living)
    orphans.event_logs = sorted(set(orphans.event_logs))
    if dry_run:
        for run_id in orphans.event_logs:
            orphans.events += await count_events(stores, tenant, run_id)
    else:
        for start in range(0, len(orphans.event_logs), CHECK_BATCH):
            batch = orphans.event_logs[start : start + CHECK_BATCH]
            await stores.run_events.delete(tenant, batch)
            _audit(principal, "runEvents", {"runIds": batch})
    return orphans


async def _find_blobs(stores: Stores, orphans: TenantOrphans, agents: _Agents) -> None:
    after: BlobRef | None = None
    while page := await stores.checkpoints.list(
        orphans.tenant, agent_ids=None, blob_ids=None, after=after, limit=MAX_LIMIT
    ):
        after = page[-1]
        for ref in page:
            if not await agents.exists(ref.agent_id):
                orphans.blobs.setdefault(ref.agent_id, []).append(ref.blob_id)


async def _find_runs(stores: Stores, orphans: TenantOrphans, agents: _Agents) -> None:
    after: RunPosition | None = None
    while page := await stores.runs.list(
        orphans.tenant, agent_ids=None, run_ids=None, after=after, limit=MAX_LIMIT
    ):
        after = run_position(page[-1])
        for run in page:
            if not await agents.exists(run["agentId"]):
                orphans.runs.setdefault(run["agentId"], []).append(run["runId"])


async def _existing_runs(stores: Stores, tenant: str, run_ids: list[str]) -> set[str]:
    found: set[str] = set()
    after: RunPosition | None = None
    while page := await stores.runs.list(
        tenant, agent_ids=None, run_ids=run_ids, after=after, limit=MAX_LIMIT
    ):
        found.update(run["runId"] for run in page)
        after = run_position(page[-1])
    return found


def _batches(ids: list[str]) -> list[list[str]]:
    return [ids[start : start + MAX_LIMIT] for start in range(0, len(ids), MAX_LIMIT)]


def _audit(principal: Principal, substore: str, filter_: Document) -> None:
    audit.record(principal, substore, "delete", {"filter": filter_})
