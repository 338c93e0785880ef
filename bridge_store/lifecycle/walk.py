"""A store's history as a stream of items, read through the backend API.

Per agent, in the order that keeps the stream consistent per agent while bridges
write: the agent document is read first, then its runs, each run's events (after the
run document, so a run's log is at least as new as the run), then its checkpoint
blobs; the agent item is yielded last, so a sink that writes items in order only
shows an agent once everything it pointed at when read is there.

Agents are listed by ``updatedAt``, which moves: an agent updated during the walk
jumps before the cursor and the walk would miss it. So after the pass over every
agent, the agents updated since the walk started (less :data:`CLOCK_SKEW_MS`) are
walked again; whatever was acknowledged before the walk started is in the stream.
Runs (by turn and id), events (by seq) and blobs (by id) never move.

Memory stays bounded: one page of each listing at a time, and blobs are read when
the sink writes them. Orphans (runs, events or blobs whose agent is gone) are not
reached; ``bridge-store gc`` finds those.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from bridge_store.backend.substores import AgentPosition, BlobRef, RunPosition, agent_position
from bridge_store.backend.substores import run_position as position_of_run
from bridge_store.stack.stores import Stores
from bridge_store.types import Document
from bridge_store.wire.fields import MAX_LIMIT

from .items import AgentItem, BlobItem, BlobReader, EventsItem, Item, RunItem

#: Items per list call: the contract layer's largest page, which every backend takes.
PAGE = MAX_LIMIT
#: How far a bridge's clock (which stamps updatedAt) may run behind this one.
CLOCK_SKEW_MS = 5 * 60 * 1000


async def tenants_of(stores: Stores, wanted: Sequence[str] | None) -> list[str]:
    """``wanted``, or every tenant holding agents or blobs, sorted."""
    if wanted is not None:
        return list(wanted)
    found = set(await stores.agents.tenants()) | set(await stores.checkpoints.tenants())
    return sorted(found)


def walk_started() -> int:
    """The time to look again from once a walk is over (see :func:`agents_updated_since`)."""
    return int(time.time() * 1000) - CLOCK_SKEW_MS


async def agents_of(stores: Stores, tenant: str) -> AsyncIterator[Document]:
    """Every agent of ``tenant``, in list order (agents updated meanwhile may be missed)."""
    after: AgentPosition | None = None
    while page := await stores.agents.list(tenant, cwd=None, after=after, limit=PAGE):
        for agent in page:
            yield agent
        after = agent_position(page[-1])


async def agents_updated_since(
    stores: Stores, tenant: str, since_ms: int
) -> AsyncIterator[Document]:
    """The agents of ``tenant`` updated at or after ``since_ms``: those a walk started
    then may have missed (see the module docstring)."""
    async for agent in agents_of(stores, tenant):
        # Not a number (text a row kept before imports were checked): SQLite lists it
        # first, so it is taken as updated, not compared.
        updated_at = agent.get("updatedAt")
        if isinstance(updated_at, int | float) and updated_at < since_ms:
            return
        yield agent


async def every_agent(stores: Stores, tenant: str) -> AsyncIterator[Document]:
    """Every agent of ``tenant``, then those updated meanwhile (some twice, then)."""
    started = walk_started()
    async for agent in agents_of(stores, tenant):
        yield agent
    async for agent in agents_updated_since(stores, tenant, started):
        yield agent


async def count_agents(stores: Stores, tenants: Sequence[str]) -> int:
    """How many agents the tenants hold now (a progress bar's total)."""
    total = 0
    for tenant in tenants:
        after: AgentPosition | None = None
        while page := await stores.agents.list(tenant, cwd=None, after=after, limit=PAGE):
            total += len(page)
            after = agent_position(page[-1])
    return total


async def agent_items(
    stores: Stores, tenant: str, agent: Document, *, creators: bool = False
) -> AsyncIterator[Item]:
    """Everything of one agent, the agent item last (see the module docstring).

    With ``creators``, agent and run items carry who created them (one more read per
    agent and per page of runs), for a copy that keeps them.
    """
    agent_id = agent["agentId"]
    after_run: RunPosition | None = None
    while runs := await stores.runs.list(
        tenant, agent_ids=[agent_id], run_ids=None, after=after_run, limit=PAGE
    ):
        started_by: dict[tuple[str, str], str] = {}
        if creators:
            keys = [(run["agentId"], run["runId"]) for run in runs]
            started_by = await stores.runs.creators(tenant, keys)
        for run in runs:
            yield RunItem(tenant, run, started_by.get((run["agentId"], run["runId"])))
            async for events in run_events(stores, tenant, run["runId"]):
                yield events
        after_run = position_of_run(runs[-1])
    async for blob in blobs_of(stores, tenant, agent_id):
        yield blob
    creator = (await stores.agents.creators(tenant, [agent_id])).get(agent_id) if creators else None
    yield AgentItem(tenant, agent, creator)


async def run_events(stores: Stores, tenant: str, run_id: str) -> AsyncIterator[EventsItem]:
    after = 0
    while page := await stores.run_events.list(tenant, run_id, after_seq=after, limit=PAGE):
        yield EventsItem(tenant, run_id, page)
        after = page[-1]["seq"]


async def blobs_of(stores: Stores, tenant: str, agent_id: str) -> AsyncIterator[BlobItem]:
    checkpoints = stores.checkpoints
    after: BlobRef | None = None
    while refs := await checkpoints.list(
        tenant, agent_ids=[agent_id], blob_ids=None, after=after, limit=PAGE
    ):
        for ref in refs:
            yield BlobItem(tenant, ref.agent_id, ref.blob_id, _reader(stores, tenant, ref))
        after = refs[-1]


def _reader(stores: Stores, tenant: str, ref: BlobRef) -> BlobReader:
    async def read() -> bytes | None:
        return await stores.checkpoints.get(tenant, ref.agent_id, ref.blob_id)

    return read
