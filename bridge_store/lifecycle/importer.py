"""Restoring an archive into a store (``bridge-store import``).

Two passes over the file, both streaming (:mod:`.archive_read`: one member, one blob,
one line at a time, in bounded memory). The first checks it whole before anything is
written: the header's version, the manifest's fields, every member's size and SHA-256,
and every item as a CallStore call carrying it would be checked (:mod:`.checks`),
events in seq order without gaps, and the counts of each tenant against the manifest.
A damaged member is reported as damaged even when its content would also be refused.
The second writes every item through a :class:`~.sink.StoreSink`, in archive order
(blobs, runs, events, agents last), checking each again, so an interrupted import is
finished by running it again, as a copy is.

Whatever the archive holds, the outcome is one line: :class:`~.archive.ArchiveError`
(or a refused item) and a non-zero exit, with nothing written when the first pass
refuses it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

from bridge_store.backend.substores import SUBSTORE_NAMES, SubstoreName
from bridge_store.stack.stores import Stores
from bridge_store.types import Document
from bridge_store.wire.fields import MAX_LIMIT

from .archive import LINE_MEMBERS, ArchiveError, loads_strict, shown
from .archive_read import BlobRecord, LineRecord, LinesMember, Record, read_archive
from .checks import DEFAULT_MAX_BLOB_BYTES, InvalidItem, checked
from .items import AgentItem, BlobItem, BlobReader, EventsItem, Item, RunItem
from .manifest import Manifest
from .sink import StoreSink
from .tally import Tally
from .verify import Census

#: The most tenants an archive's blobs may be of: what is counted before the manifest
#: says which tenants there are stays small whatever the archive holds.
MAX_TENANTS = 100_000
#: The substore and the document's key of each JSON-lines member.
_LINE_KINDS: dict[str, tuple[SubstoreName, str]] = {
    name: (substore, key) for name, substore, key in LINE_MEMBERS
}


def check_archive(path: Path, *, limit: int = DEFAULT_MAX_BLOB_BYTES) -> Manifest:
    """The archive's manifest, after checking all of it (see the module docstring);
    ``limit``: the request limit, which bounds a blob and a line."""
    check = _Check()
    for record in read_archive(path, limit=limit, keep_blobs=False):
        check.feed(record)
    return check.finish(path)


class _Check:
    """The first pass: every record checked, counted and compared with the manifest."""

    def __init__(self) -> None:
        self.manifest: Manifest | None = None
        self.counts: Counter[tuple[str, SubstoreName]] = Counter()
        self.agents: set[tuple[str, str]] = set()
        self.last_event: tuple[str, str, int] | None = None

    def feed(self, record: Record) -> None:
        if isinstance(record, Manifest):
            self.manifest = record
        elif isinstance(record, BlobRecord):
            key: tuple[str, SubstoreName] = (record.tenant, "checkpoints")
            if key not in self.counts and len(self.counts) >= MAX_TENANTS:
                # The manifest (which lists the tenants) comes after the blobs.
                raise ArchiveError(f"the archive's blobs are of over {MAX_TENANTS} tenants")
            self.counts[key] += 1
        else:
            self._member(record)

    def _member(self, member: LinesMember) -> None:
        # The first bad line stops the reading of lines, but the member is read to its
        # end first: a damaged member is reported as damaged, the better answer.
        problem: ArchiveError | None = None
        for line in member.lines():
            try:
                self._line(line)
            except ArchiveError as error:
                problem = error
                break
        member.finish()
        if problem is not None:
            raise problem

    def _line(self, record: LineRecord) -> None:
        assert self.manifest is not None  # lines come after it (archive_read checks)
        item = line_item(record)
        where = f"line {record.number} of {record.member}"
        if item.tenant not in self.manifest.tenants:
            raise ArchiveError(f"{where}: tenant {item.tenant} is not in the manifest")
        if isinstance(item, EventsItem):
            seq = item.events[0]["seq"]
            last = self.last_event
            if seq != 1 and last != (item.tenant, item.run_id, seq - 1):
                raise ArchiveError(
                    f"{where}: event {seq} of run {shown(item.run_id)} does not follow "
                    f"event {seq - 1} (a run's events are consecutive, from 1)"
                )
            self.last_event = (item.tenant, item.run_id, seq)
        elif isinstance(item, AgentItem):
            key = (item.tenant, item.document["agentId"])
            if key not in self.manifest.agents or key in self.agents:
                raise ArchiveError(
                    f"{where}: agent {shown(key[1])} of tenant {key[0]} is not in the "
                    "manifest's agents, or is there twice"
                )
            self.agents.add(key)
        self.counts[(item.tenant, _LINE_KINDS[record.member][0])] += 1

    def finish(self, path: Path) -> Manifest:
        manifest = self.manifest
        assert manifest is not None  # read_archive refuses an archive without one
        tenants = {tenant for tenant, _ in self.counts} | set(manifest.tenants)
        for tenant in sorted(tenants):
            listed = manifest.tenants.get(tenant, dict.fromkeys(SUBSTORE_NAMES, 0))
            for name in SUBSTORE_NAMES:
                if self.counts[(tenant, name)] != listed[name]:
                    raise ArchiveError(
                        f"{path} holds {self.counts[(tenant, name)]} {name} of tenant "
                        f"{tenant}; its manifest lists {listed[name]}"
                    )
        return manifest


def line_item(record: LineRecord) -> Item:
    """The item a JSON-lines record holds, checked as a CallStore call would be (one
    event an item); :class:`ArchiveError` naming the line otherwise."""
    where = f"line {record.number} of {record.member}"
    if record.problem is not None:
        raise ArchiveError(f"{where} {record.problem}")
    substore, key = _LINE_KINDS[record.member]
    try:
        entry = loads_strict(record.text)
    except ValueError as error:
        raise ArchiveError(f"{where} is not JSON export writes: {error}") from None
    if not isinstance(entry, dict) or "tenant" not in entry or key not in entry:
        raise ArchiveError(f'{where} must be an object with "tenant" and "{key}"')
    tenant, document, creator = entry["tenant"], entry[key], entry.get("creator")
    item: Item
    if substore == "runs":
        item = RunItem(tenant, document, creator)
    elif substore == "agents":
        item = AgentItem(tenant, document, creator)
    else:
        run_id = document.get("runId") if isinstance(document, dict) else None
        item = EventsItem(tenant, run_id if isinstance(run_id, str) else "", [document])
    try:
        return checked(item)
    except InvalidItem as error:
        raise ArchiveError(f"{where}: {error}") from None


async def import_archive(
    stores: Stores,
    path: Path,
    *,
    tenants: Sequence[str] | None,
    overwrite: bool,
    tally: Tally | None = None,
    on_agent: Callable[[], None] | None = None,
    limit: int = DEFAULT_MAX_BLOB_BYTES,
) -> Tally:
    """Write the archive's items of ``tenants`` (default: all) into ``stores``."""
    sink = StoreSink(stores, overwrite=overwrite, tally=tally, max_blob_bytes=limit)
    async for item in _items(path, tenants, limit):
        await sink.write(item)
        if on_agent is not None and isinstance(item, AgentItem):
            on_agent()
    return sink.tally


async def _items(path: Path, tenants: Sequence[str] | None, limit: int) -> AsyncIterator[Item]:
    wanted = None if tenants is None else set(tenants)
    events = _EventPages()
    for record in read_archive(path, limit=limit, keep_blobs=True):
        if isinstance(record, BlobRecord):
            if wanted is None or record.tenant in wanted:
                yield BlobItem(record.tenant, record.agent_id, record.blob_id, _reader(record))
        elif isinstance(record, LinesMember):
            for line in record.lines():
                item = line_item(line)
                if wanted is not None and item.tenant not in wanted:
                    continue
                if isinstance(item, EventsItem):
                    for page in events.add(item):
                        yield page
                else:
                    yield item
            record.finish()
            for page in events.flush():
                yield page


class _EventPages:
    """Consecutive events of one run, gathered into pages of at most MAX_LIMIT."""

    def __init__(self) -> None:
        self._page: list[Document] = []
        self._of = ("", "")

    def add(self, item: EventsItem) -> Iterator[EventsItem]:
        event, run = item.events[0], (item.tenant, item.run_id)
        page = self._page
        follows = page and run == self._of and page[-1]["seq"] + 1 == event["seq"]
        if page and (not follows or len(page) == MAX_LIMIT):
            yield from self.flush()
        self._of = run
        self._page.append(event)

    def flush(self) -> Iterator[EventsItem]:
        if self._page:
            yield EventsItem(*self._of, self._page)
            self._page = []


def _reader(record: BlobRecord) -> BlobReader:
    async def read() -> bytes | None:
        return record.data

    return read


def census_of(manifest: Manifest, tenants: Sequence[str] | None) -> Census:
    """What the archive holds of ``tenants`` (default: all), as a store's census."""
    census = Census()
    chosen = set(manifest.tenants) if tenants is None else set(tenants)
    for tenant, counts in manifest.tenants.items():
        if tenant in chosen:
            for name in SUBSTORE_NAMES:
                census.counts[name] += counts[name]
    for (tenant, agent_id), digest in manifest.agents.items():
        if tenant in chosen:
            census.digests[(tenant, agent_id)] = digest
    return census
