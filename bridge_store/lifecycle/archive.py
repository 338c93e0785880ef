"""The archive ``bridge-store export`` writes and ``import`` reads: what is where.

A tar file, gzip-compressed, PAX format (docs/archive.md describes it for readers
without bridge-store). Members, in this order:

- ``bridge-store-archive.json``: ``{"format": "bridge-store-archive", "version": 1}``,
  so a reader knows what it holds before reading further;
- ``checkpoints/<tenant>/<agentId hex>/<blobId hex>``: one member per checkpoint blob,
  its bytes as stored (in the clear, or sealed as the store held them); its SHA-256
  in the member's PAX header ``bridge-store.sha256``; ids are UTF-8, hex-encoded so
  that any id is a valid path;
- ``manifest.json``: the version again, when and from which tenants it was written,
  item counts per substore, the SHA-256 and size of each JSON-lines member, and a
  digest per agent (:class:`~.verify.AgentDigest`);
- ``runs.jsonl``, ``runEvents.jsonl``, ``agents.jsonl``: one JSON object a line,
  ``{"tenant": ..., "run"|"event"|"agent": document}``, runs and agents with
  ``"creator"`` (the token name that created them) where the store recorded one; events
  in seq order per run.

Agents come last, so an import, reading in order, writes an agent after its history.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from bridge_store.backend.substores import SubstoreName
from bridge_store.backend.tenants import is_valid_tenant
from bridge_store.errors import ConnectError
from bridge_store.wire import jsontext
from bridge_store.wire.fields import require_id

FORMAT = "bridge-store-archive"
VERSION = 1
HEADER_MEMBER = "bridge-store-archive.json"
MANIFEST_MEMBER = "manifest.json"
CHECKPOINTS_DIR = "checkpoints/"
#: PAX header holding a blob member's SHA-256 (hex).
SHA256_HEADER = "bridge-store.sha256"
#: The JSON-lines members, in archive order, with the substore and the key of the
#: document in each line.
LINE_MEMBERS: tuple[tuple[str, SubstoreName, str], ...] = (
    ("runs.jsonl", "runs", "run"),
    ("runEvents.jsonl", "runEvents", "event"),
    ("agents.jsonl", "agents", "agent"),
)


#: A checkpoint member's name: a tenant name, then two ids as lowercase hex.
_BLOB_MEMBER = re.compile(r"checkpoints/([^/]*)/((?:[0-9a-f]{2})+)/((?:[0-9a-f]{2})+)")
#: Characters of a hostile member name or value shown in a message.
_SHOWN = 80


class ArchiveError(Exception):
    """The file is not an archive this version reads, or it is damaged."""


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."


def header() -> bytes:
    return jsontext.dumps({"format": FORMAT, "version": VERSION})


def check_header(data: bytes) -> None:
    try:
        parsed = loads_strict(data)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or parsed.get("format") != FORMAT:
        raise ArchiveError("not a bridge-store archive (no bridge-store-archive.json first)")
    if parsed.get("version") != VERSION:
        raise ArchiveError(
            f"archive format version {shown(parsed.get('version'))}: this bridge-store reads "
            f"version {VERSION}; use the bridge-store that wrote it, or a newer one"
        )


def blob_member(tenant: str, agent_id: str, blob_id: str) -> str:
    return f"{CHECKPOINTS_DIR}{tenant}/{_hex(agent_id)}/{_hex(blob_id)}"


def blob_of_member(name: str) -> tuple[str, str, str]:
    """(tenant, agentId, blobId) of a checkpoint member's name, each as the contract
    takes it (a valid tenant name, ids that pass the id rules)."""
    match = _BLOB_MEMBER.fullmatch(name)
    if match is None:
        raise ArchiveError(f"unexpected member {shown(name)}")
    try:
        tenant, agent_id, blob_id = match[1], _unhex(match[2]), _unhex(match[3])
    except UnicodeDecodeError:
        raise ArchiveError(f"member {shown(name)}: an id in it is not UTF-8") from None
    if not is_valid_tenant(tenant):
        raise ArchiveError(f"member {shown(name)}: tenant {shown(tenant)} is not a tenant name")
    try:
        require_id({"agentId": agent_id, "blobId": blob_id}, "agentId", "checkpoint")
        require_id({"agentId": agent_id, "blobId": blob_id}, "blobId", "checkpoint")
    except ConnectError as error:
        raise ArchiveError(f"member {shown(name)}: {error.message}") from None
    return tenant, agent_id, blob_id


def line(tenant: str, key: str, document: Any, creator: str | None = None) -> bytes:
    """One JSON line; an archive without ``creator`` (an earlier version's) reads as
    items whose creator is unknown, as they were."""
    entry = {"tenant": tenant, key: document}
    if creator is not None:
        entry["creator"] = creator
    return jsontext.dumps(entry) + b"\n"


def _hex(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").hex()


def _unhex(text: str) -> str:
    # surrogatepass: a name holding one is then refused by the id rules, by name.
    return bytes.fromhex(text).decode("utf-8", "surrogatepass")


# -- reading JSON an archive holds ------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is out of range")
    return number


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"key {shown(twice)} appears twice in one object")
    return result


_DECODER = json.JSONDecoder(
    parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique
)


def loads_strict(data: bytes) -> Any:
    """JSON as export writes it, or ValueError saying what else it is.

    UTF-8 only; numbers as the CallStore JSON codec takes them (no NaN or infinities,
    none that overflow a double); and no key twice in one object: export never writes
    one, and readers that keep the first and readers that keep the last would restore
    different documents. Absurd nesting is a ValueError too (not a RecursionError).
    """
    try:
        return _DECODER.decode(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 (byte {error.start})") from None
    except RecursionError:
        raise ValueError("nested too deep") from None
