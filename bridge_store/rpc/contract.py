"""The CallStore contract: input validation, document shapes and list cursors.

Everything a client can get wrong is checked here, once, for every backend, and
answered with ``invalid_argument`` naming the offending field (``input.agent.agentId``).
Documents are stored as given: validation only looks at the fields the store indexes
on and never drops or rewrites unknown ones.
"""

from __future__ import annotations

import binascii
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..backend.sort_keys import sort_integer
from ..backend.substores import AgentPosition, BlobRef, RunPosition
from ..errors import invalid_argument
from ..types import Document
from ..wire.cursors import (
    cursor_id,
    cursor_integer,
    decode_cursor,
    encode_cursor,
)
from ..wire.fields import (
    MAX_CWD_BYTES,
    MAX_SAFE_INTEGER,
    _check_key,
    as_integer,
    optional_string,
    require_id,
    require_integer,
    require_object,
)
from ..wire.large_bodies import DecodedBlob


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_optional_types(doc: Document, field: str, spec: Mapping[str, tuple[type, ...]]) -> None:
    for key, allowed in spec.items():
        value = doc.get(key)
        if value is not None and not isinstance(value, allowed):
            names = " or ".join("object" if t is dict else t.__name__ for t in allowed)
            raise invalid_argument(f"{field}.{key} must be {names} or null")


def _normalize_integer_field(doc: Document, key: str, field: str, *, required: bool) -> None:
    if doc.get(key) is None and not required:
        return
    doc[key] = require_integer(doc, key, field)


# -- documents ------------------------------------------------------------------------

_AGENT_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "activeRunId": (str,),
    "name": (str,),
    "latestCheckpoint": (dict,),
    "sdkMetadata": (dict,),
}

_RUN_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {
    "status": (str,),
    "requestId": (str,),
    "model": (dict,),
    "usageRef": (str,),
    "usage": (dict,),
}


def validate_agent(value: Any, field: str) -> Document:
    """An agent document, checked; the fields the store indexes on are required."""
    agent = dict(require_object(value, field))
    require_id(agent, "agentId", field)
    if not isinstance(agent.get("cwd"), str):
        raise invalid_argument(f"{field}.cwd must be a string")
    _check_key(agent["cwd"], f"{field}.cwd", MAX_CWD_BYTES)
    _normalize_integer_field(agent, "updatedAt", field, required=True)
    _normalize_integer_field(agent, "createdAt", field, required=False)
    _check_optional_types(agent, field, _AGENT_OPTIONAL_TYPES)
    return agent


def validate_run(value: Any, field: str) -> Document:
    """A run document, checked; the fields the store indexes on are required."""
    run = dict(require_object(value, field))
    require_id(run, "runId", field)
    require_id(run, "agentId", field)
    _normalize_integer_field(run, "turnNumber", field, required=True)
    for key in ("createdAt", "updatedAt", "startedAt", "endedAt"):
        _normalize_integer_field(run, key, field, required=False)
    _check_optional_types(run, field, _RUN_OPTIONAL_TYPES)
    return run


def new_event(value: Any, field: str) -> Document:
    """The event to append, from runEvents.append input (without seq/offset)."""
    data = require_object(value, field)
    event: Document = {
        "runId": require_id(data, "runId", field),
        "eventType": require_id(data, "eventType", field),
        "payload": data.get("payload"),
        "payloadRef": optional_string(data, "payloadRef", field, max_bytes=None),
        "idempotencyKey": optional_string(data, "idempotencyKey", field),
        "createdAt": now_ms(),
    }
    if event["idempotencyKey"] == "":
        raise invalid_argument(f"{field}.idempotencyKey must be a non-empty string or null")
    # Fields the contract does not name are kept; seq and offset are the store's to assign.
    if not data.keys() - event.keys() <= {"seq", "offset"}:
        for key, extra in data.items():
            if key not in event and key not in ("seq", "offset"):
                event[key] = extra
    return event


def parse_offset(parent: Mapping[str, Any], field: str) -> int:
    """``afterOffset`` (the decimal seq of the last event seen) as an int; 0 if absent."""
    raw = parent.get("afterOffset")
    if raw is None or raw == "":
        return 0
    value = as_integer(raw) if not isinstance(raw, str) else _decimal(raw)
    if value is None or value < 0 or value > MAX_SAFE_INTEGER:
        raise invalid_argument(f"{field}.afterOffset must be a decimal event offset")
    return value


def _decimal(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 16 else None


# -- blobs ----------------------------------------------------------------------------


def take_blob(parent: dict[str, Any], field: str) -> bytes:
    """Decode ``parent["data"]`` and remove it from ``parent``.

    A checkpoint's base64 text is a third larger than the blob and can be 100 MiB;
    once decoded nothing needs it, so it is not left alive in the request while the
    store writes the blob.
    """
    raw = parent.get("data")
    if isinstance(raw, DecodedBlob):
        # A large body's blob, decoded off the event loop (wire/large_bodies.py).
        del parent["data"]
        return raw.data
    if not isinstance(raw, str):
        raise invalid_argument(f"{field}.data must be a base64 string")
    try:
        # Reads the str in place (b64decode would first copy it to bytes). strict_mode
        # refuses what b64decode(validate=True) refuses: characters outside the
        # alphabet, bad padding, data after padding.
        blob = binascii.a2b_base64(raw, strict_mode=True)
    except (binascii.Error, ValueError):
        raise invalid_argument(f"{field}.data is not valid base64") from None
    del parent["data"]
    return blob


#: Encoding a blob in pieces of this many bytes (a multiple of 3, so the pieces join
#: into the base64 of the whole) keeps the blob's bytes, its base64 bytes and its base64
#: text from all being alive at once: only one piece at a time is in two forms.
_BASE64_PIECE_BYTES = 3 * 1024 * 1024


def base64_pieces(data: bytes) -> list[str]:
    """The base64 text of ``data`` in pieces; ``"".join`` them for the whole."""
    view = memoryview(data)
    return [
        binascii.b2a_base64(view[start : start + _BASE64_PIECE_BYTES], newline=False).decode(
            "ascii"
        )
        for start in range(0, len(view), _BASE64_PIECE_BYTES)
    ]


# -- cursors --------------------------------------------------------------------------
def agent_cursor(position: AgentPosition) -> str | None:
    """None if no cursor goes past the agent (:mod:`.sort_keys`): the listing ends."""
    at = sort_integer(position.updated_at, ascending=False, bound=MAX_SAFE_INTEGER)
    return None if at is None else encode_cursor("agents", at, position.agent_id)


def run_cursor(position: RunPosition) -> str | None:
    """None if no cursor goes past the run (:mod:`.sort_keys`): the listing ends."""
    turn = sort_integer(position.turn_number, ascending=True, bound=MAX_SAFE_INTEGER)
    ids = (position.run_id, position.agent_id)
    return None if turn is None else encode_cursor("runs", turn, *ids)


def blob_cursor(ref: BlobRef) -> str:
    return encode_cursor("checkpoints", ref.blob_id, ref.agent_id)


def parse_agent_cursor(filter_: Mapping[str, Any], field: str) -> AgentPosition | None:
    if filter_.get("cursor") in (None, ""):
        return None
    updated_at, agent_id = decode_cursor(filter_["cursor"], "agents", field, 2)
    return AgentPosition(
        updated_at=cursor_integer(updated_at, field), agent_id=cursor_id(agent_id, field)
    )


def parse_run_cursor(filter_: Mapping[str, Any], field: str) -> RunPosition | None:
    if filter_.get("cursor") in (None, ""):
        return None
    turn_number, run_id, agent_id = decode_cursor(filter_["cursor"], "runs", field, 3)
    return RunPosition(
        turn_number=cursor_integer(turn_number, field),
        run_id=cursor_id(run_id, field),
        agent_id=cursor_id(agent_id, field),
    )


def parse_blob_cursor(filter_: Mapping[str, Any], field: str) -> BlobRef | None:
    if filter_.get("cursor") in (None, ""):
        return None
    blob_id, agent_id = decode_cursor(filter_["cursor"], "checkpoints", field, 2)
    return BlobRef(blob_id=cursor_id(blob_id, field), agent_id=cursor_id(agent_id, field))


def page(items: Sequence[Any], limit: int) -> tuple[list[Any], bool]:
    """Split a fetch of ``limit + 1`` rows into the page and whether more follow."""
    return list(items[:limit]), len(items) > limit
