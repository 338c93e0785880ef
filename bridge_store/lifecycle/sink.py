"""Writing a stream of items into an opened store, so that writing it twice changes nothing.

Each item is compared with what the store already holds: absent, it is created; there
and identical (as canonical JSON, or byte for byte), it is skipped; there and
different, it is reported and left alone, or replaced when ``overwrite``. That is what
makes every command built on it resumable: rerun after an interruption, it skips what
was written and finishes the rest, duplicating nothing.

Events are restored with their seqs (:meth:`~bridge_store.backend.substores.RunEventStore.restore`).
A run whose log differs is left alone entirely (later pages too), or with
``overwrite`` rewritten: its log is deleted and restored from the events the store
held before the first difference (which were compared equal, page by page) and the
source's events from there on. The held prefix is spilled to a temporary file, so a
long log costs no memory.

Every item passes :func:`~.checks.checked` first (the checks a CallStore call gets),
and a blob over ``max_blob_bytes`` (the request limit, for items that come from
outside a store) is refused: an invalid item stops the command with one line, never
reaches the store.

An item written ``again`` (a copy walking an agent a second time because it changed
meanwhile) was written by this sink before: what differs is the sink's own earlier
write of an older version, so it is replaced without a report, and only items new
since then are counted, so the summary counts each item once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from typing import IO

from bridge_store.backend.substores import SubstoreName
from bridge_store.errors import Code, ConnectError
from bridge_store.stack.stores import Stores
from bridge_store.types import Document
from bridge_store.wire import jsontext

from .checks import check_blob_size, checked
from .items import AgentItem, BlobItem, EventsItem, Item, RunItem, canonical
from .tally import Outcome, Tally

#: Events read or restored per call when a log is rewritten.
PAGE = 500


class StoreSink:
    """Writes items into ``stores`` (opened, and sealed as a server would seal them)."""

    def __init__(
        self,
        stores: Stores,
        *,
        overwrite: bool,
        tally: Tally | None = None,
        max_blob_bytes: int | None = None,
    ) -> None:
        self._stores = stores
        self._overwrite = overwrite
        self._max_blob_bytes = max_blob_bytes
        self.tally = tally if tally is not None else Tally()
        #: Runs whose log differs and is left alone: later pages of them are skipped.
        self._left_alone: set[tuple[str, str]] = set()

    async def write(self, item: Item, *, again: bool = False) -> bool:
        """Write ``item`` (``again``: see the module docstring); whether some of it
        differs from what the store holds and was left alone."""
        item = checked(item)
        if isinstance(item, AgentItem):
            return await self._agent(item, again)
        if isinstance(item, RunItem):
            return await self._run(item, again)
        if isinstance(item, EventsItem):
            return await self._events(item, again)
        return await self._blob(item, again)

    def _count(self, substore: SubstoreName, outcome: Outcome, size: int, again: bool) -> None:
        """Count one item seen; written ``again``, only one this sink has not counted."""
        if again and outcome != Outcome.CREATED:
            return
        self.tally.add(substore, outcome)
        self.tally.sizes[substore] += size

    async def _agent(self, item: AgentItem, again: bool) -> bool:
        agents, tenant, doc = self._stores.agents, item.tenant, item.document
        text = canonical(doc)
        held = await agents.get(tenant, doc["agentId"])
        if held is None:
            try:
                await agents.create(tenant, doc, item.creator)
                # An agent written again was counted the first time, even if it is
                # gone from the store since.
                self._count("agents", Outcome.SAME if again else Outcome.CREATED, len(text), again)
                return False
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await agents.get(tenant, doc["agentId"])
        if held is not None and canonical(held) == text:
            self._count("agents", Outcome.SAME, len(text), again)
            return False
        if again:
            await agents.update(tenant, doc)
            return False
        self.tally.sizes["agents"] += len(text)
        if self._differs(f"agent {doc['agentId']} of tenant {tenant}", "agents"):
            await agents.update(tenant, doc)
            return False
        return True

    async def _run(self, item: RunItem, again: bool) -> bool:
        runs, tenant, doc = self._stores.runs, item.tenant, item.document
        text = canonical(doc)
        held = await runs.get(tenant, doc["agentId"], doc["runId"])
        if held is None:
            try:
                await runs.create(tenant, doc, item.creator)
                self._count("runs", Outcome.CREATED, len(text), again)
                return False
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await runs.get(tenant, doc["agentId"], doc["runId"])
        if held is not None and canonical(held) == text:
            self._count("runs", Outcome.SAME, len(text), again)
            return False
        if again:
            await runs.update(tenant, doc)
            return False
        self.tally.sizes["runs"] += len(text)
        what = f"run {doc['runId']} of agent {doc['agentId']} of tenant {tenant}"
        if self._differs(what, "runs"):
            await runs.update(tenant, doc)
            return False
        return True

    async def _events(self, item: EventsItem, again: bool) -> bool:
        events, tenant, run_id = item.events, item.tenant, item.run_id
        if not events:
            return False
        texts = [canonical(event) for event in events]
        if (tenant, run_id) in self._left_alone:
            self.tally.sizes["runEvents"] += sum(len(text) for text in texts)
            self.tally.add("runEvents", Outcome.DIFFERENT, len(events))
            return True
        log = self._stores.run_events
        first = events[0]["seq"]
        held = await log.list(tenant, run_id, after_seq=first - 1, limit=len(events))
        same = sum(canonical(h) == text for h, text in zip(held, texts, strict=False))
        different = len(held) - same
        # Written again, the events held were counted the first time: only new ones count.
        counted = texts[len(held) :] if again else texts
        self.tally.sizes["runEvents"] += sum(len(text) for text in counted)
        if not again:
            self.tally.add("runEvents", Outcome.SAME, same)
        if not different:
            created = await log.restore(tenant, run_id, events[len(held) :])
            self.tally.add("runEvents", Outcome.CREATED, created)
            return False
        what = f"the events of run {run_id} of tenant {tenant} (from seq {first})"
        if again:
            # This sink's own copy of a log the source rewrote since: rewrite it too.
            await self._rewrite(tenant, run_id, events)
            self.tally.add("runEvents", Outcome.CREATED, len(events) - len(held))
            return False
        if not self._overwrite:
            self.tally.differ(f"runEvents: {what} differ; left alone (overwrite replaces them)")
            self._left_alone.add((tenant, run_id))
            self.tally.add("runEvents", Outcome.DIFFERENT, len(events) - same)
            return True
        self.tally.differ(f"runEvents: {what} differed; replaced")
        await self._rewrite(tenant, run_id, events)
        self.tally.add("runEvents", Outcome.REPLACED, different)
        self.tally.add("runEvents", Outcome.CREATED, len(events) - len(held))
        return False

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

    async def _blob(self, item: BlobItem, again: bool) -> bool:
        checkpoints, tenant = self._stores.checkpoints, item.tenant
        data = await item.read()
        if data is None:
            self._count("checkpoints", Outcome.VANISHED, 0, again)
            return False
        if self._max_blob_bytes is not None:
            check_blob_size(item, len(data), self._max_blob_bytes)
        held = await checkpoints.get(tenant, item.agent_id, item.blob_id)
        if held is None:
            try:
                await checkpoints.create(tenant, item.agent_id, item.blob_id, data)
                self._count("checkpoints", Outcome.CREATED, len(data), again)
                return False
            except ConnectError as error:
                if error.code != Code.ALREADY_EXISTS:
                    raise
                held = await checkpoints.get(tenant, item.agent_id, item.blob_id)
        if held == data:
            self._count("checkpoints", Outcome.SAME, len(data), again)
            return False
        if again:
            await checkpoints.update(tenant, item.agent_id, item.blob_id, data)
            return False
        self.tally.sizes["checkpoints"] += len(data)
        what = f"blob {item.blob_id} of agent {item.agent_id} of tenant {tenant}"
        if self._differs(what, "checkpoints"):
            await checkpoints.update(tenant, item.agent_id, item.blob_id, data)
            return False
        return True

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
