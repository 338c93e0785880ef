"""Hostile archives: a real export's members, changed, then re-hashed so that every
SHA-256 the archive carries matches again (an attacker can do that too)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Member = tuple[tarfile.TarInfo, bytes]
Members = list[Member]

SHA256_HEADER = "bridge-store.sha256"
LINE_MEMBERS = ("runs.jsonl", "runEvents.jsonl", "agents.jsonl")


def read_members(path: Path) -> Members:
    with tarfile.open(path, "r:gz") as tar:
        members = []
        for info in tar:
            data = tar.extractfile(info)
            assert data is not None
            members.append((info, data.read()))
        return members


class Zeros:
    """``size`` zero bytes as a file, never all in memory: a blob that compresses to
    almost nothing (a gzip bomb, or a large blob for a memory test)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return bytes(size)

    @staticmethod
    def sha256(size: int) -> str:
        digest, chunk = hashlib.sha256(), bytes(1 << 20)
        for start in range(0, size, len(chunk)):
            digest.update(chunk[: min(len(chunk), size - start)])
        return digest.hexdigest()


def write_members(
    path: Path,
    members: Members,
    *,
    big: dict[str, int] | None = None,
    tar_format: int = tarfile.PAX_FORMAT,
) -> None:
    """Write ``members`` as a gzip tar; ``big`` adds members of that many zero bytes
    (after the header member), with their SHA-256 in the PAX header."""
    with tarfile.open(path, "w:gz", format=tar_format, compresslevel=1) as tar:
        for index, (info, data) in enumerate(members):
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
            if index == 0:
                for name, size in (big or {}).items():
                    zeros = tarfile.TarInfo(name)
                    zeros.size = size
                    zeros.pax_headers = {SHA256_HEADER: Zeros.sha256(size)}
                    tar.addfile(zeros, Zeros(size))


def rehash(members: Members) -> Members:
    """Every size and SHA-256 made right again: blobs' PAX headers, the JSON-lines
    members' digests in the manifest (when the manifest still has them)."""
    result = []
    for info, data in members:
        info = copy.copy(info)
        info.pax_headers = dict(info.pax_headers)
        if info.isreg():
            info.size = len(data)
        if info.name.startswith("checkpoints/") and SHA256_HEADER in info.pax_headers:
            info.pax_headers[SHA256_HEADER] = hashlib.sha256(data).hexdigest()
        result.append((info, data))
    contents = {info.name: data for info, data in result}

    def digests(manifest: Any) -> None:
        listed = manifest.get("members") if isinstance(manifest, dict) else None
        if isinstance(listed, dict):
            for name in LINE_MEMBERS:
                if name in contents and isinstance(listed.get(name), dict):
                    data = contents[name]
                    listed[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

    try:
        return edit_manifest(result, digests)
    except ValueError:
        return result  # a manifest that is not JSON any more: nothing to re-hash


def edit_manifest(members: Members, edit: Callable[[Any], Any]) -> Members:
    """``edit`` applied to the parsed manifest (it may change it in place or return a
    replacement)."""
    result = []
    for info, data in members:
        if info.name == "manifest.json":
            manifest = json.loads(data)
            edited = edit(manifest)
            data = json.dumps(manifest if edited is None else edited).encode()
        result.append((info, data))
    return result


def edit_lines(members: Members, name: str, edit: Callable[[list[bytes]], list[bytes]]) -> Members:
    """``edit`` applied to the lines (each with its newline) of JSON-lines member ``name``."""
    return [
        (info, b"".join(edit(data.splitlines(keepends=True))) if info.name == name else data)
        for info, data in members
    ]


def edit_first(name: str, edit: Callable[[dict[str, Any]], Any]) -> Callable[[Members], Members]:
    """A mutation: ``edit`` applied to the parsed first line of member ``name``."""

    def first(lines: list[bytes]) -> list[bytes]:
        entry = json.loads(lines[0])
        edited = edit(entry)
        text = edited if isinstance(edited, bytes) else json.dumps(entry).encode()
        return [text + b"\n", *lines[1:]]

    return lambda members: edit_lines(members, name, first)


def without(name: str) -> Callable[[Members], Members]:
    return lambda members: [(i, d) for i, d in members if i.name != name]


def add_after(after: str, info: tarfile.TarInfo, data: bytes = b"") -> Callable[[Members], Members]:
    """A mutation: the member ``info`` (with ``data``) inserted after member ``after``."""

    def mutate(members: Members) -> Members:
        index = next(n for n, (i, _) in enumerate(members) if i.name == after)
        info.size = len(data) if info.isreg() else 0
        return [*members[: index + 1], (info, data), *members[index + 1 :]]

    return mutate


def member(name: str, kind: bytes = tarfile.REGTYPE, **fields: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


@dataclass
class Hostile:
    """One hostile archive: what changes, and what the one line must say."""

    message: str
    mutate: Callable[[Members], Members] = lambda members: members
    #: Applied after re-hashing, to break what re-hashing made right.
    after: Callable[[Members], Members] = lambda members: members
    big: dict[str, int] = field(default_factory=dict)
    tar_format: int = tarfile.PAX_FORMAT
    import_flags: list[str] = field(default_factory=list)

    def write(self, members: Members, path: Path) -> None:
        changed = self.after(rehash(self.mutate(members)))
        write_members(path, changed, big=self.big, tar_format=self.tar_format)
