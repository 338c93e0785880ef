"""What a run's trace is made from, read from the stores: the run, its agent, its events
folded as the viewer folds them, and who started it.

Read from the backends' own substores (below the sealing): nothing sealed is opened,
and nothing here reads ``sdkMetadata`` or a checkpoint. The events are folded as they
are read (:class:`~bridge_store.viewer.transcript.TranscriptBuilder`, the transcript's
own fold, so a trace and the viewer agree on what a tool call was), and only up to
:data:`MAX_EVENTS`, so a hostile run of millions of events costs a bounded read.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..stack.stores import Stores
from ..types import Document
from ..viewer.transcript import TranscriptBuilder
from ..wire.fields import MAX_LIMIT

#: Events read per run at most; a run past it is sent with what was read, marked.
MAX_EVENTS = 50_000


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run and what its trace says about it."""

    tenant: str
    run: Document
    #: The run's agent, None when it is gone.
    agent: Document | None
    #: The run's events, folded.
    transcript: TranscriptBuilder
    #: The name of the token that created the run, None when nobody is recorded.
    creator: str | None
    #: Whether the events stopped at :data:`MAX_EVENTS`.
    events_cut: bool = False


async def read_run(stores: Stores, tenant: str, agent_id: str, run_id: str) -> RunRecord | None:
    """The run's record, or None when the run is gone (deleted, pruned)."""
    run = await stores.runs.get(tenant, agent_id, run_id)
    if run is None:
        return None
    return await record_of(stores, tenant, run)


async def record_of(stores: Stores, tenant: str, run: Document) -> RunRecord:
    """The record of ``run``, a document already read."""
    agent_id, run_id = run["agentId"], run["runId"]
    agent = await stores.agents.get(tenant, agent_id)
    creators = await stores.runs.creators(tenant, [(agent_id, run_id)])
    transcript = TranscriptBuilder()
    read, after, cut = 0, 0, False
    while True:
        page = await stores.run_events.list(tenant, run_id, after_seq=after, limit=MAX_LIMIT)
        for event in page:
            if read == MAX_EVENTS:
                cut = True
                break
            # A run id shared by two agents shares one log: keep this agent's events.
            if _agent_of(event) in (None, agent_id):
                transcript.add(event)
            read += 1
        if cut or len(page) < MAX_LIMIT:
            break
        after = page[-1]["seq"]
    return RunRecord(tenant, run, agent, transcript, creators.get((agent_id, run_id)), cut)


def _agent_of(event: Document) -> str | None:
    payload = event.get("payload")
    agent = payload.get("agentId") if isinstance(payload, dict) else None
    return agent if isinstance(agent, str) else None
