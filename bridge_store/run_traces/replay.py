"""``bridge-store export-runs``: stored history sent as traces, the same traces every time.

Walks each tenant's agents (or one, ``--agent``), each agent's runs by turn, and
sends every run that has ended and started in the window asked for, batched. A run's
trace and span ids come from its names (:mod:`.ids`), so sending history twice
sends the same traces again: a backend that deduplicates keeps one copy. Runs not
ended (queued, running) are left out and counted; so are runs whose agent is gone,
which no walk by agent reaches (``bridge-store gc`` finds those).

A batch the collector does not take is tried again after 1, 2, 4 and 8 seconds; then
the command stops, saying how many runs went, and may simply be run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan

from ..backend.history import summarize_run
from ..backend.substores import RunPosition, run_position
from ..errors import BackendUnreachable
from ..lifecycle.walk import PAGE, agents_of
from ..stack.stores import Stores
from ..types import Document
from .mapping import SpanMaker
from .reading import record_of
from .sender import OtlpSender, encoded_size
from .watch import ENDED

#: A batch is sent once it holds this many spans or this many runs.
BATCH_SPANS = 512
BATCH_RUNS = 64
#: Seconds between the tries of a batch the collector did not take.
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs: these tenants (None: every one), one agent, started in
    ``[since_ms, until_ms)`` (None: unbounded)."""

    tenants: Sequence[str] | None = None
    agent_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def takes(self, run: Document) -> bool:
        started = summarize_run(run).started_at
        started = started if started is not None else 0
        if self.since_ms is not None and started < self.since_ms:
            return False
        return self.until_ms is None or started < self.until_ms


@dataclass(slots=True)
class ReplayTally:
    """What a replay sent (or, dry, would send): runs, spans and request bytes."""

    runs: int = 0
    spans: int = 0
    bytes: int = 0
    not_ended: int = 0
    agents_done: int = 0
    #: Told after each agent and each batch (a progress display).
    changed: Callable[[ReplayTally], None] = field(default=lambda tally: None, repr=False)


async def tenants_with_runs(stores: Stores, wanted: Sequence[str] | None) -> list[str]:
    if wanted is not None:
        return list(wanted)
    return sorted(set(await stores.agents.tenants()) | set(await stores.runs.tenants()))


async def agents_chosen(stores: Stores, tenant: str, agent_id: str | None) -> AsyncIterator[str]:
    if agent_id is not None:
        if await stores.agents.get(tenant, agent_id) is not None:
            yield agent_id
        return
    async for agent in agents_of(stores, tenant):
        yield agent["agentId"]


async def count_agents(stores: Stores, selection: Selection) -> int:
    """How many agents the replay will walk (a pass over the agent lists)."""
    total = 0
    for tenant in await tenants_with_runs(stores, selection.tenants):
        total += sum([1 async for _ in agents_chosen(stores, tenant, selection.agent_id)])
    return total


class Replay:
    """One replay: what it reads, how it makes spans, where they go (None: dry run)."""

    def __init__(
        self, stores: Stores, maker: SpanMaker, sender: OtlpSender | None, tally: ReplayTally
    ) -> None:
        self._stores = stores
        self._maker = maker
        self._sender = sender
        self.tally = tally
        self._batch: list[ReadableSpan] = []
        self._batch_runs = 0

    async def run(self, selection: Selection) -> ReplayTally:
        for tenant in await tenants_with_runs(self._stores, selection.tenants):
            async for agent_id in agents_chosen(self._stores, tenant, selection.agent_id):
                await self._agent(tenant, agent_id, selection)
                self.tally.agents_done += 1
                self.tally.changed(self.tally)
        await self._flush()
        return self.tally

    async def _agent(self, tenant: str, agent_id: str, selection: Selection) -> None:
        after: RunPosition | None = None
        while True:
            page = await self._stores.runs.list(
                tenant, agent_ids=[agent_id], run_ids=None, after=after, limit=PAGE
            )
            for run in page:
                if not selection.takes(run):
                    continue
                if run.get("status") not in ENDED:
                    self.tally.not_ended += 1
                    continue
                record = await record_of(self._stores, tenant, run)
                self._batch.extend(self._maker.spans(record))
                self._batch_runs += 1
                if len(self._batch) >= BATCH_SPANS or self._batch_runs >= BATCH_RUNS:
                    await self._flush()
            if len(page) < PAGE:
                return
            after = run_position(page[-1])

    async def _flush(self) -> None:
        batch, runs = self._batch, self._batch_runs
        if not batch:
            return
        size = encoded_size(batch)
        if self._sender is not None:
            await self._send(batch, runs)
        self._batch, self._batch_runs = [], 0
        tally = self.tally
        tally.runs += runs
        tally.spans += len(batch)
        tally.bytes += size
        tally.changed(tally)

    async def _send(self, batch: list[ReadableSpan], runs: int) -> None:
        assert self._sender is not None
        for delay in (*RETRY_DELAYS, None):
            if await self._sender.send(batch):
                return
            if delay is not None:
                await asyncio.sleep(delay)
        raise BackendUnreachable(
            f"the collector at {self._sender.shown} did not take {runs} runs after "
            f"{len(RETRY_DELAYS) + 1} tries; {self.tally.runs} runs were sent before: run "
            "the command again (runs sent twice are the same traces)"
        )
