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
  ``{"tenant": ..., "run"|"event"|"agent": document}``; events in seq order per run.

Agents come last, so an import, reading in order, writes an agent after its history.
"""

from __future__ import annotations

from typing import Any

from bridge_store.substores import SubstoreName
from bridge_store.wire import jsontext

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


class ArchiveError(Exception):
    """The file is not an archive this version reads, or it is damaged."""


def header() -> bytes:
    return jsontext.dumps({"format": FORMAT, "version": VERSION})


def check_header(data: bytes) -> None:
    try:
        parsed = jsontext.loads(data)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or parsed.get("format") != FORMAT:
        raise ArchiveError("not a bridge-store archive (no bridge-store-archive.json first)")
    if parsed.get("version") != VERSION:
        raise ArchiveError(
            f"archive format version {parsed.get('version')!r}: this bridge-store reads "
            f"version {VERSION}; use the bridge-store that wrote it, or a newer one"
        )


def blob_member(tenant: str, agent_id: str, blob_id: str) -> str:
    return f"{CHECKPOINTS_DIR}{tenant}/{_hex(agent_id)}/{_hex(blob_id)}"


def blob_of_member(name: str) -> tuple[str, str, str]:
    """(tenant, agentId, blobId) of a checkpoint member's name."""
    try:
        tenant, agent_hex, blob_hex = name.removeprefix(CHECKPOINTS_DIR).split("/")
        return tenant, _unhex(agent_hex), _unhex(blob_hex)
    except ValueError:
        raise ArchiveError(f"unexpected member {name!r}") from None


def line(tenant: str, key: str, document: Any) -> bytes:
    return jsontext.dumps({"tenant": tenant, key: document}) + b"\n"


def _hex(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").hex()


def _unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", "surrogatepass")
