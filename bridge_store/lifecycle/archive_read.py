"""Reading an archive's members one at a time, in bounded memory, whatever the file holds.

The archive may come from anyone: its SHA-256s say only that it was not damaged after
it was written. So the tar is read as a stream (never extracted), and everything
tarfile would read whole or keep is bounded first:

- extended headers (PAX, GNU long names) are refused above
  :data:`MAX_EXTENDED_HEADER_BYTES` before tarfile reads them, and sparse members
  (whose maps tarfile reads whole) are refused;
- tarfile's list of the members seen is emptied as it goes;
- a member is a regular file with one of the names :mod:`.archive` lists, in the
  order export writes them (header, blobs, manifest, runs, events, agents), never a
  link, a device or a directory; nothing is kept per blob member (a blob listed twice
  is caught by the manifest's counts, or imported as the first, the second compared
  with it), so a tar of millions of tiny members costs no memory;
- a blob's size is checked against the request limit before its bytes are read; its
  bytes are hashed in chunks (and kept, up to that limit, only when asked);
- the manifest is at most :data:`MAX_MANIFEST_BYTES`; a JSON-lines member must have
  the size the manifest gives, and its lines at most the request limit each.

Records come out in archive order: :class:`BlobRecord`, the
:class:`~.manifest.Manifest`, then a :class:`LinesMember` per JSON-lines member, whose
lines come out before its digest is known: :meth:`LinesMember.finish` then checks it.
So a reader that must not act on a damaged member waits for ``finish``
(:mod:`.importer`'s first pass does), and one that finds a bad line can stop reading
lines and still learn whether the member was damaged, at the cost of reading it only.
"""

from __future__ import annotations

import hashlib
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeAlias

from .archive import (
    CHECKPOINTS_DIR,
    HEADER_MEMBER,
    LINE_MEMBERS,
    MANIFEST_MEMBER,
    SHA256_HEADER,
    ArchiveError,
    blob_of_member,
    check_header,
    shown,
)
from .manifest import Manifest, parse_manifest

#: Bytes read at a time while hashing a member.
CHUNK = 1 << 20
#: The largest PAX or GNU extended header taken: export writes a few hundred bytes.
MAX_EXTENDED_HEADER_BYTES = 64 * 1024
#: The largest header member (``{"format": ..., "version": 1}``).
MAX_HEADER_BYTES = 64 * 1024
#: The largest manifest taken: a digest per agent, about 150 bytes each, so room for
#: well over a million agents.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BlobRecord:
    tenant: str
    agent_id: str
    blob_id: str
    size: int
    #: The bytes, when the reader was asked to keep them.
    data: bytes | None


@dataclass(frozen=True, slots=True)
class LineRecord:
    member: str
    number: int
    text: bytes
    #: Why the line cannot be read (too long, empty, unterminated), or None.
    problem: str | None = None


Record: TypeAlias = "BlobRecord | Manifest | LinesMember"


class _BoundedTarInfo(tarfile.TarInfo):
    """A member header that refuses what tarfile would otherwise read whole.

    tarfile offers no public hook for this: it reads an extended header of any
    declared size into memory (a few kilobytes of gzip can declare gigabytes), and a
    sparse member's map likewise. These overrides run before it does.
    """

    def _bounded(self) -> None:
        if self.size > MAX_EXTENDED_HEADER_BYTES:
            raise _Refused(
                f"an extended tar header of {self.size} bytes (export writes at most "
                f"{MAX_EXTENDED_HEADER_BYTES})"
            )

    def _proc_pax(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        self._bounded()
        return tarfile.TarInfo._proc_pax(self, tar)  # type: ignore[attr-defined,no-any-return]

    def _proc_gnulong(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        self._bounded()
        return tarfile.TarInfo._proc_gnulong(self, tar)  # type: ignore[attr-defined,no-any-return]

    def _proc_sparse(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        raise _Refused("a sparse member (export writes none)")

    def _proc_gnusparse_00(self, *args: Any) -> None:
        raise _Refused("a sparse member (export writes none)")

    _proc_gnusparse_01 = _proc_gnusparse_00
    _proc_gnusparse_10 = _proc_gnusparse_00


class _Refused(tarfile.TarError):
    """Raised inside tarfile (which passes it on) for what this reader does not take."""


def read_archive(path: Path, *, limit: int, keep_blobs: bool) -> Iterator[Record]:
    """The records of the archive at ``path`` (see the module docstring); ``limit`` is
    the request limit that bounds a blob and a line."""
    try:
        with tarfile.open(path, "r|*", tarinfo=_BoundedTarInfo) as tar:
            yield from _Reader(tar, path, limit, keep_blobs).records()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ArchiveError(f"cannot read {path} as an archive: {error}") from None


class _Reader:
    def __init__(self, tar: tarfile.TarFile, path: Path, limit: int, keep_blobs: bool) -> None:
        self._tar = tar
        self._path = path
        self._limit = limit
        self._keep_blobs = keep_blobs
        self._manifest: Manifest | None = None
        #: The JSON-lines members still to come, in order.
        self._lines_to_come = [name for name, _, _ in LINE_MEMBERS]

    def _members(self) -> Iterator[tuple[tarfile.TarInfo, IO[bytes]]]:
        while (member := self._tar.next()) is not None:
            # tarfile keeps every member it read (typeshed omits the list); nothing
            # here needs them, and a million blobs would be a million kept.
            self._tar.members.clear()  # type: ignore[attr-defined]
            if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or member.issparse():
                raise ArchiveError(
                    f"member {shown(member.name)} is a {_kind(member)}: an archive holds "
                    "only regular files"
                )
            data = self._tar.extractfile(member)
            assert data is not None  # a regular file always has data
            yield member, data

    def records(self) -> Iterator[Record]:
        members = self._members()
        first = next(members, None)
        if first is None or first[0].name != HEADER_MEMBER:
            raise ArchiveError("not a bridge-store archive (no header member first)")
        check_header(self._small(*first, MAX_HEADER_BYTES))
        for member, data in members:
            name = member.name
            if name == MANIFEST_MEMBER and self._manifest is None:
                self._manifest = parse_manifest(self._small(member, data, MAX_MANIFEST_BYTES))
                yield self._manifest
            elif name.startswith(CHECKPOINTS_DIR) and self._manifest is None:
                yield self._blob(member, data)
            elif self._manifest is not None and name == next(iter(self._lines_to_come), None):
                self._lines_to_come.pop(0)
                lines = self._lines(member, data)
                yield lines
                lines.finish()  # if the consumer did not
            else:
                raise ArchiveError(f"unexpected member {shown(name)} {self._where()}")
        if self._manifest is None or self._lines_to_come:
            missing = [MANIFEST_MEMBER] if self._manifest is None else self._lines_to_come
            raise ArchiveError(f"{self._path} is incomplete (missing: {', '.join(missing)})")

    def _where(self) -> str:
        if self._manifest is None:
            return "(expected checkpoint blobs or the manifest)"
        if self._lines_to_come:
            return f"(expected {self._lines_to_come[0]})"
        return "(after the last member)"

    def _small(self, member: tarfile.TarInfo, data: IO[bytes], most: int) -> bytes:
        if member.size > most:
            raise ArchiveError(f"member {member.name} is {member.size} bytes, over {most}")
        return data.read()

    def _blob(self, member: tarfile.TarInfo, data: IO[bytes]) -> BlobRecord:
        name = member.name
        tenant, agent_id, blob_id = blob_of_member(name)
        if member.size > self._limit:
            raise ArchiveError(
                f"checkpoint blob {shown(blob_id)} of agent {shown(agent_id)} of tenant "
                f"{tenant} is {member.size} bytes, over the {self._limit}-byte request "
                "limit (--max-request-bytes: no bridge could have stored it through a "
                "server with it)"
            )
        blob = None
        if self._keep_blobs:
            # Read whole (at most the limit) and hashed as it is: one copy, not two.
            blob = data.read()
            digest = hashlib.sha256(blob)
        else:
            digest = hashlib.sha256()
            while chunk := data.read(CHUNK):
                digest.update(chunk)
        if member.pax_headers.get(SHA256_HEADER) != digest.hexdigest():
            raise ArchiveError(f"member {shown(name)} is damaged (its SHA-256 differs)")
        return BlobRecord(tenant, agent_id, blob_id, member.size, blob)

    def _lines(self, member: tarfile.TarInfo, data: IO[bytes]) -> LinesMember:
        assert self._manifest is not None  # the order checked in records()
        expected = self._manifest.members[member.name]
        if member.size != expected.size:
            raise ArchiveError(
                f"member {member.name} is damaged (its size differs from the manifest's)"
            )
        return LinesMember(member.name, data, expected.sha256, self._limit)


class LinesMember:
    """A JSON-lines member being read: its lines, then :meth:`finish`, which reads what
    is left unread (in chunks: a reader that stopped at a bad line pays no more per
    line) and raises if the member is damaged."""

    def __init__(self, name: str, data: IO[bytes], sha256: str, limit: int) -> None:
        self.name = name
        self._data = data
        self._expected = sha256
        self._limit = limit
        self._digest = hashlib.sha256()
        self.finished = False

    def lines(self) -> Iterator[LineRecord]:
        """Each line; one that cannot be read (too long, empty, unterminated) ends them."""
        data, digest, limit = self._data, self._digest, self._limit
        number = 0
        while text := data.readline(limit + 1):
            number += 1
            digest.update(text)
            problem = None
            if len(text) > limit:
                problem = f"is longer than the {limit}-byte request limit"
            elif not text.endswith(b"\n"):
                problem = "does not end with a newline"
            elif not text.strip():
                problem = "is empty"
            if problem is not None:
                yield LineRecord(self.name, number, b"", problem)
                return
            yield LineRecord(self.name, number, text)

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        while chunk := self._data.read(CHUNK):
            self._digest.update(chunk)
        if self._digest.hexdigest() != self._expected:
            raise ArchiveError(f"member {self.name} is damaged (its SHA-256 differs)")


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symbolic link"
    if member.islnk():
        return "hard link"
    if member.isdir():
        return "directory"
    if member.isdev():
        return "device or FIFO"
    if member.issparse():
        return "sparse file"
    return f"member of tar type {member.type!r}"
