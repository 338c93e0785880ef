"""Writing a store's history into one archive (``bridge-store export``); :mod:`.archive`
says what goes where.

Blobs go into the tar as they are walked; the JSON-lines members are spooled to
temporary files next to the output (they can only follow once complete, after the
manifest that holds their digests), so memory holds one blob and one page at a time,
plus a digest per agent for the manifest. The archive is written as ``FILE.partial``
and renamed when complete: an interrupted export leaves no truncated archive behind
under the name, and is simply run again. It is created readable by its owner only
(0600): unless the store is sealed (and exported without its key file), it holds
every agent's ``blobEncryptionKey`` in the clear, which :class:`Exported` counts. An
item import would refuse (:mod:`.checks`: a row kept before imports were checked)
stops the export in one line naming it, so every archive written can be restored.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import io
import os
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bridge_store.backend.substores import SUBSTORE_NAMES, SubstoreName
from bridge_store.errors import ConfigurationError
from bridge_store.stack.stores import Stores
from bridge_store.wire import jsontext

from .archive import (
    FORMAT,
    HEADER_MEMBER,
    LINE_MEMBERS,
    MANIFEST_MEMBER,
    SHA256_HEADER,
    VERSION,
    blob_member,
    header,
    line,
)
from .checks import checked
from .items import AgentItem, BlobItem, EventsItem, Item, RunItem
from .tally import Outcome, Tally
from .verify import AgentDigest, Census
from .walk import agent_items, every_agent, tenants_of

#: gzip level: 6 compresses JSON nearly as well as 9 at about twice the speed.
COMPRESSLEVEL = 6
#: How the partial files of an export in progress end (``.OUTPUT.XXXXXXXX.partial``).
PARTIAL_SUFFIX = ".partial"
#: How every gzip file, so every archive, starts.
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class _Spool:
    """One JSON-lines member being written to a temporary file."""

    file: IO[bytes]
    sha256: Any = field(default_factory=hashlib.sha256)
    size: int = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.sha256.update(data)
        self.size += len(data)


@dataclass(frozen=True, slots=True)
class Exported:
    manifest: dict[str, Any]
    #: Agents whose sdkMetadata, with its blobEncryptionKey, the archive holds in the
    #: clear (the store was not sealed, or was opened with its key file).
    plaintext_keys: int


async def export_history(
    stores: Stores,
    output: Path,
    *,
    tenants: Sequence[str] | None,
    tally: Tally | None = None,
    on_agent: Callable[[], None] | None = None,
) -> Exported:
    """Write the tenants' history (default: all) to ``output``, readable by its owner
    only (0600, from its creation)."""
    tally = tally if tally is not None else Tally()
    _check_replaceable(output)
    chosen = await tenants_of(stores, tenants)
    censuses: dict[str, Census] = {tenant: Census() for tenant in chosen}
    digests: list[dict[str, str]] = []
    plaintext_keys = 0
    partial: Path | None = None
    try:
        with contextlib.ExitStack() as stack:
            spools = {
                name: _Spool(stack.enter_context(tempfile.TemporaryFile(dir=output.parent)))
                for name, _, _ in LINE_MEMBERS
            }
            partial, raw, tar = _private_tar(stack, output)
            _add(tar, HEADER_MEMBER, header())
            for tenant in chosen:
                exported: set[str] = set()
                async for agent in every_agent(stores, tenant):
                    # An agent seen again (it moved while listed) was exported as first read.
                    if agent["agentId"] in exported:
                        continue
                    exported.add(agent["agentId"])
                    digest = AgentDigest(censuses[tenant])
                    async for item in agent_items(stores, tenant, agent, creators=True):
                        # What import would refuse is refused here, so that every archive
                        # export writes can be restored.
                        cached, data = await _cached(checked(item))
                        _write(tar, spools, cached, data, tally)
                        await digest.feed(cached)
                        plaintext_keys += _holds_plaintext_key(cached)
                    digests.append(
                        {
                            "tenant": tenant,
                            "agentId": agent["agentId"],
                            "sha256": digest.digest().hex(),
                        }
                    )
                    if on_agent is not None:
                        on_agent()
            manifest = _manifest(chosen, censuses, spools, digests)
            _add(tar, MANIFEST_MEMBER, jsontext.dumps(manifest))
            for name, _, _ in LINE_MEMBERS:
                spool = spools[name]
                spool.file.seek(0)
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = spool.size, int(time.time()), 0o600
                tar.addfile(info, spool.file)
            # Renamed complete, while its lock still holds: no other export takes it
            # for an interrupted one's meanwhile.
            tar.close()
            raw.flush()
            os.replace(partial, output)
    except BaseException:
        if partial is not None:
            partial.unlink(missing_ok=True)  # nothing half-written is left behind
        raise
    return Exported(manifest, plaintext_keys)


def _check_replaceable(output: Path) -> None:
    """Refuse to replace a file that is not an archive: ``--output`` naming the store's
    own SQLite file (or any other file) by mistake would replace it with the backup."""
    try:
        with output.open("rb") as existing:
            start = existing.read(len(_GZIP_MAGIC))
    except (FileNotFoundError, IsADirectoryError):
        return  # nothing there; a directory is refused when the archive is written
    if start and start != _GZIP_MAGIC:
        raise ConfigurationError(
            f"--output {output} exists and is not an archive: export replaces only an "
            "earlier archive; choose another name, or remove it first"
        )


def _private_tar(
    stack: contextlib.ExitStack, output: Path
) -> tuple[Path, IO[bytes], tarfile.TarFile]:
    """A gzip tar written to a new partial file beside ``output`` that only its owner
    can read: the file's path, the file, and the tar.

    Each export writes its own partial file (mkstemp: created 0600, never through a
    link planted in its place), locked while it is written: two exports to one
    ``--output`` at once each write a whole archive and the later rename wins, where a
    shared ``OUTPUT.partial`` let one rename the other's half-written file into place.
    Partial files an interrupted export left (unlocked) are removed first.
    """
    _remove_stale_partials(output)
    descriptor, name = tempfile.mkstemp(
        dir=output.parent, prefix=f".{output.name}.", suffix=PARTIAL_SUFFIX
    )
    raw = stack.enter_context(os.fdopen(descriptor, "wb"))
    fcntl.flock(raw.fileno(), fcntl.LOCK_EX)  # new and unique: never waits
    tar = tarfile.open(  # noqa: SIM115 - closed by the caller's ExitStack
        fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=COMPRESSLEVEL
    )
    stack.enter_context(tar)
    return Path(name), raw, tar


def _remove_stale_partials(output: Path) -> None:
    """Remove the partial files of ``output`` that no running export holds."""
    for stale in output.parent.glob(f".{glob.escape(output.name)}.*{PARTIAL_SUFFIX}"):
        try:
            descriptor = os.open(stale, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue  # gone meanwhile, a link, or not ours to read
        try:
            if os.fstat(descriptor).st_uid != os.getuid():
                continue
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # an export is writing it
        else:
            stale.unlink(missing_ok=True)
        finally:
            os.close(descriptor)


def _holds_plaintext_key(item: Item) -> bool:
    if not isinstance(item, AgentItem):
        return False
    metadata = item.document.get("sdkMetadata")
    return isinstance(metadata, dict) and metadata.get("blobEncryptionKey") is not None


async def _cached(item: Item) -> tuple[Item, bytes | None]:
    """A blob item whose bytes are read once, here, for both the tar and the digest."""
    if not isinstance(item, BlobItem):
        return item, None
    data = await item.read()

    async def read() -> bytes | None:
        return data

    return BlobItem(item.tenant, item.agent_id, item.blob_id, read), data


def _write(
    tar: tarfile.TarFile, spools: dict[str, _Spool], item: Item, data: bytes | None, tally: Tally
) -> None:
    if isinstance(item, BlobItem):
        if data is None:
            tally.add("checkpoints", Outcome.VANISHED)
            return
        _add(
            tar,
            blob_member(item.tenant, item.agent_id, item.blob_id),
            data,
            {SHA256_HEADER: hashlib.sha256(data).hexdigest()},
        )
        _count(tally, "checkpoints", len(data))
    elif isinstance(item, EventsItem):
        for event in item.events:
            text = line(item.tenant, "event", event)
            spools["runEvents.jsonl"].write(text)
            _count(tally, "runEvents", len(text))
    else:
        substore: SubstoreName = "runs" if isinstance(item, RunItem) else "agents"
        key = "run" if substore == "runs" else "agent"
        text = line(item.tenant, key, item.document, item.creator)
        spools[f"{substore}.jsonl"].write(text)
        _count(tally, substore, len(text))


def _count(tally: Tally, substore: SubstoreName, size: int) -> None:
    tally.add(substore, Outcome.CREATED)
    tally.sizes[substore] += size


def _add(tar: tarfile.TarFile, name: str, data: bytes, pax: dict[str, str] | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
    if pax:
        info.pax_headers = pax
    tar.addfile(info, io.BytesIO(data))


def _manifest(
    tenants: list[str],
    censuses: dict[str, Census],
    spools: dict[str, _Spool],
    digests: list[dict[str, str]],
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "createdAt": int(time.time() * 1000),
        "tenants": {
            tenant: {name: censuses[tenant].counts[name] for name in SUBSTORE_NAMES}
            for tenant in tenants
        },
        "members": {
            name: {"sha256": spools[name].sha256.hexdigest(), "size": spools[name].size}
            for name, _, _ in LINE_MEMBERS
        },
        "agents": digests,
    }
