"""Restoring an archive into a store (``bridge-store import``).

Two passes over the file, both streaming (one member, one blob, one line at a time):
the first checks it whole (the header's version, every member's SHA-256 against its
PAX header or the manifest, the blob count) so a damaged archive is refused before
anything is written; the second writes every item through a
:class:`~.sink.StoreSink`, in archive order (blobs, runs, events, agents last), so an
interrupted import is finished by running it again, as a copy is.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from bridge_store.contract import MAX_LIMIT
from bridge_store.stores import Stores
from bridge_store.substores import SUBSTORE_NAMES
from bridge_store.types import Document
from bridge_store.wire import jsontext

from .archive import (
    CHECKPOINTS_DIR,
    HEADER_MEMBER,
    LINE_MEMBERS,
    MANIFEST_MEMBER,
    SHA256_HEADER,
    ArchiveError,
    blob_of_member,
    check_header,
)
from .items import AgentItem, BlobItem, EventsItem, Item, RunItem
from .sink import StoreSink
from .tally import Tally
from .verify import Census

#: Bytes read at a time while hashing a member.
CHUNK = 1 << 20


def _members(path: Path) -> Iterator[tuple[tarfile.TarInfo, IO[bytes]]]:
    """Each member with its data, in order; the header checked first."""
    try:
        with tarfile.open(path, "r|*") as tar:
            first = True
            for member in tar:
                data = tar.extractfile(member)
                if data is None:
                    raise ArchiveError(f"member {member.name!r} is not a file")
                if first:
                    if member.name != HEADER_MEMBER:
                        raise ArchiveError("not a bridge-store archive (no header member first)")
                    check_header(data.read())
                    first = False
                    continue
                yield member, data
    except (tarfile.TarError, EOFError, OSError) as error:
        raise ArchiveError(f"cannot read {path}: {error}") from error


def check_archive(path: Path) -> dict[str, Any]:
    """The archive's manifest, after checking every member (see the module docstring)."""
    manifest: dict[str, Any] | None = None
    blobs = 0
    seen: set[str] = set()
    for member, data in _members(path):
        if member.name == MANIFEST_MEMBER:
            manifest = _manifest(data.read())
            continue
        digest = hashlib.sha256()
        while chunk := data.read(CHUNK):
            digest.update(chunk)
        if member.name.startswith(CHECKPOINTS_DIR):
            blob_of_member(member.name)
            if member.pax_headers.get(SHA256_HEADER) != digest.hexdigest():
                raise ArchiveError(f"member {member.name} is damaged (its SHA-256 differs)")
            blobs += 1
        elif manifest is not None and member.name in manifest["members"]:
            if manifest["members"][member.name]["sha256"] != digest.hexdigest():
                raise ArchiveError(f"member {member.name} is damaged (its SHA-256 differs)")
            seen.add(member.name)
        else:
            raise ArchiveError(f"unexpected member {member.name!r}")
    if manifest is None or seen != {name for name, _, _ in LINE_MEMBERS}:
        raise ArchiveError(f"{path} is incomplete (members are missing)")
    expected = sum(counts["checkpoints"] for counts in manifest["tenants"].values())
    if blobs != expected:
        raise ArchiveError(f"{path} holds {blobs} checkpoint blobs; its manifest lists {expected}")
    return manifest


def _manifest(data: bytes) -> dict[str, Any]:
    check_header(data)
    try:
        manifest: dict[str, Any] = jsontext.loads_document(data)
        strings = [manifest["members"][name]["sha256"] for name, _, _ in LINE_MEMBERS]
        for entry in manifest["agents"]:
            strings += [entry["tenant"], entry["agentId"]]
            bytes.fromhex(entry["sha256"])
        if not all(isinstance(text, str) for text in strings):
            raise TypeError("a digest or an id is not a string")
        for counts in manifest["tenants"].values():
            if not all(isinstance(counts[name], int) for name in SUBSTORE_NAMES):
                raise TypeError("a count is not an integer")
    except (KeyError, TypeError, ValueError) as error:
        raise ArchiveError(f"the manifest is malformed ({type(error).__name__}: {error})") from None
    return manifest


async def import_archive(
    stores: Stores,
    path: Path,
    *,
    tenants: Sequence[str] | None,
    overwrite: bool,
    tally: Tally | None = None,
    on_agent: Callable[[], None] | None = None,
) -> Tally:
    """Write the archive's items of ``tenants`` (default: all) into ``stores``."""
    sink = StoreSink(stores, overwrite=overwrite, tally=tally)
    async for item in _items(path, tenants):
        await sink.write(item)
        if on_agent is not None and isinstance(item, AgentItem):
            on_agent()
    return sink.tally


async def _items(path: Path, tenants: Sequence[str] | None) -> AsyncIterator[Item]:
    wanted = None if tenants is None else set(tenants)
    for member, data in _members(path):
        if member.name.startswith(CHECKPOINTS_DIR):
            tenant, agent_id, blob_id = blob_of_member(member.name)
            if wanted is None or tenant in wanted:
                yield BlobItem(tenant, agent_id, blob_id, _reader(data.read()))
        elif member.name != MANIFEST_MEMBER:
            for item in _line_items(member.name, data, wanted):
                yield item


def _reader(data: bytes) -> Callable[[], Any]:
    async def read() -> bytes | None:
        return data

    return read


def _line_items(name: str, data: IO[bytes], wanted: set[str] | None) -> Iterator[Item]:
    """A JSON-lines member's items; consecutive events of a run as pages."""
    key = next(key for member, _, key in LINE_MEMBERS if member == name)
    page: list[Document] = []
    page_of = ("", "")
    for text in data:
        entry = jsontext.loads_document(text)
        tenant, document = entry["tenant"], entry[key]
        if wanted is not None and tenant not in wanted:
            continue
        if key == "run":
            yield RunItem(tenant, document)
        elif key == "agent":
            yield AgentItem(tenant, document)
        else:
            run = (tenant, document["runId"])
            if page and (
                run != page_of or page[-1]["seq"] + 1 != document["seq"] or len(page) == MAX_LIMIT
            ):
                yield EventsItem(*page_of, page)
                page = []
            page_of = run
            page.append(document)
    if page:
        yield EventsItem(*page_of, page)


def census_of(manifest: dict[str, Any], tenants: Sequence[str] | None) -> Census:
    """What the archive holds of ``tenants`` (default: all), as a store's census."""
    census = Census()
    chosen = set(manifest["tenants"]) if tenants is None else set(tenants)
    for tenant, counts in manifest["tenants"].items():
        if tenant in chosen:
            for name in SUBSTORE_NAMES:
                census.counts[name] += counts[name]
    for entry in manifest["agents"]:
        if entry["tenant"] in chosen:
            census.digests[(entry["tenant"], entry["agentId"])] = bytes.fromhex(entry["sha256"])
    return census
