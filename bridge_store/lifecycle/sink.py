"""Writing a stream of items into an opened store, so that writing it twice changes nothing.

Each item is compared with what the store already holds: absent, it is created; there
and identical (as canonical JSON, or byte for byte), it is skipped; there and
different, it is reported and left alone, or replaced when ``overwrite``. That is what
makes every command built on it resumable: rerun after an interruption, it skips what
was written and finishes the rest, duplicating nothing.

Events are restored with their seqs (:meth:`~bridge_store.substores.RunEventStore.restore`).
A run whose log differs is left alone entirely (later pages too), or with
``overwrite`` rewritten: its log is deleted and restored from the events the store
held before the first difference (which were compared equal, page by page) and the
source's events from there on. The held prefix is spilled to a temporary file, so a
long log costs no memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from typing import IO

from bridge_store.errors import Code, ConnectError
from bridge_store.stores import Stores
from bridge_store.substores import SubstoreName
from bridge_store.types import Document
from bridge_store.wire import jsontext

from .items import AgentItem, BlobItem, EventsItem, Item, RunItem, canonical
from .tally import Outcome, Tally

#: Events read or restored per call when a log is rewritten.
PAGE = 500


class StoreSink:
    """Writes items into ``stores`` (opened, and sealed as a server would seal them)."""

    def __init__(self, stores: Stores, *, overwrite: bool, tally: Tally | None = None) -> None:
        self._stores = stores
        self._overwrite = overwrite
        self.tally = tally if tally is not None else Tally()
        #: Runs whose log differs and is left alone: later pages of them are skipped.
        self._left_alone: set[tuple[str, str]] = set()

    async def write(self, item: Item) -> None:
        if isinstance(item, AgentItem):
            await self._agent(item)
        elif isinstance(item, RunItem):
            await self._run(item)
        elif isinstance(item, EventsItem):
            await self._events(item)
        else:
            await self._blob(item)

    async def _agent(self, item: AgentItem) -> None:
        agents, tenant, doc = self._stores.agents, item.tenant, item.document
        text = canonical(doc)
        self.tally.sizes["agents"] += len(text)
        held = await agents.get(tenant, doc["agentId"])
        if held is None:
            try:
                await agents.create(tenant, doc)
                self.tally.add("agents", Outcome.CREATED)
                return
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await agents.get(tenant, doc["agentId"])
        if held is not None and canonical(held) == text:
            self.tally.add("agents", Outcome.SAME)
        elif self._differs(f"agent {doc['agentId']} of tenant {tenant}", "agents"):
            await agents.update(tenant, doc)

    async def _run(self, item: RunItem) -> None:
        runs, tenant, doc = self._stores.runs, item.tenant, item.document
        text = canonical(doc)
        self.tally.sizes["runs"] += len(text)
        held = await runs.get(tenant, doc["agentId"], doc["runId"])
        if held is None:
            try:
                await runs.create(tenant, doc)
                self.tally.add("runs", Outcome.CREATED)
                return
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await runs.get(tenant, doc["agentId"], doc["runId"])
        if held is not None and canonical(held) == text:
            self.tally.add("runs", Outcome.SAME)
        elif self._differs(
            f"run {doc['runId']} of agent {doc['agentId']} of tenant {tenant}", "runs"
        ):
            await runs.update(tenant, doc)

    async def _events(self, item: EventsItem) -> None:
        events, tenant, run_id = item.events, item.tenant, item.run_id
        if not events:
            return
        texts = [canonical(event) for event in events]
        self.tally.sizes["runEvents"] += sum(len(text) for text in texts)
        if (tenant, run_id) in self._left_alone:
            self.tally.add("runEvents", Outcome.DIFFERENT, len(events))
            return
        log = self._stores.run_events
        first = events[0]["seq"]
        held = await log.list(tenant, run_id, after_seq=first - 1, limit=len(events))
        same = sum(canonical(h) == text for h, text in zip(held, texts, strict=False))
        different = len(held) - same
        self.tally.add("runEvents", Outcome.SAME, same)
        if not different:
            created = await log.restore(tenant, run_id, events[len(held) :])
            self.tally.add("runEvents", Outcome.CREATED, created)
            return
        what = f"the events of run {run_id} of tenant {tenant} (from seq {first})"
        if not self._overwrite:
            self.tally.differ(f"runEvents: {what} differ; left alone (overwrite replaces them)")
            self._left_alone.add((tenant, run_id))
            self.tally.add("runEvents", Outcome.DIFFERENT, len(events) - same)
            return
        self.tally.differ(f"runEvents: {what} differed; replaced")
        await self._rewrite(tenant, run_id, events)
        self.tally.add("runEvents", Outcome.REPLACED, different)
        self.tally.add("runEvents", Outcome.CREATED, len(events) - len(held))

    async def _rewrite(self, tenant: str, run_id: str, events: Sequence[Document]) -> None:
        """Make the run's log its held events before ``events``, then ``events``."""
        log = self._stores.run_events
        with tempfile.TemporaryFile() as spill:
            after, end = 0, events[0]["seq"] - 1
            while after < end:
                page = await log.list(tenant, run_id, after_seq=after, limit=min(PAGE, end - after))
                if not page:
                    break
                spill.writelines(jsontext.dumps(event) + b"\n" for event in page)
                after = page[-1]["seq"]
            await log.delete(tenant, [run_id])
            spill.seek(0)
            for page in _pages(spill):
                await log.restore(tenant, run_id, page)
        await log.restore(tenant, run_id, events)

    async def _blob(self, item: BlobItem) -> None:
        checkpoints, tenant = self._stores.checkpoints, item.tenant
        data = await item.read()
        if data is None:
            self.tally.add("checkpoints", Outcome.VANISHED)
            return
        self.tally.sizes["checkpoints"] += len(data)
        held = await checkpoints.get(tenant, item.agent_id, item.blob_id)
        if held is None:
            try:
                await checkpoints.create(tenant, item.agent_id, item.blob_id, data)
                self.tally.add("checkpoints", Outcome.CREATED)
                return
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await checkpoints.get(tenant, item.agent_id, item.blob_id)
        if held == data:
            self.tally.add("checkpoints", Outcome.SAME)
        elif self._differs(
            f"blob {item.blob_id} of agent {item.agent_id} of tenant {tenant}", "checkpoints"
        ):
            await checkpoints.update(tenant, item.agent_id, item.blob_id, data)

    def _differs(self, what: str, substore: SubstoreName) -> bool:
        """Count and report an item that differs; whether to replace it."""
        if self._overwrite:
            self.tally.differ(f"{substore}: {what} differed; replaced")
            self.tally.add(substore, Outcome.REPLACED)
            return True
        self.tally.differ(f"{substore}: {what} differs; left alone (overwrite replaces it)")
        self.tally.add(substore, Outcome.DIFFERENT)
        return False


def _pages(spill: IO[bytes]) -> Iterator[list[Document]]:
    """The spilled events again, a page at a time."""
    page: list[Document] = []
    for line in spill:
        page.append(jsontext.loads_document(line))
        if len(page) == PAGE:
            yield page
            page = []
    if page:
        yield page
