"""The CallStore contract: input validation, document shapes and list cursors.

Everything a client can get wrong is checked here, once, for every backend, and
answered with ``invalid_argument`` naming the offending field (``input.agent.agentId``).
Documents are stored as given: validation only looks at the fields the store indexes
on and never drops or rewrites unknown ones.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import invalid_argument
from .sort_keys import sort_integer
from .substores import AgentPosition, BlobRef, RunPosition
from .types import Document
from .wire.large_bodies import DecodedBlob

DEFAULT_AGENT_LIMIT = 50
DEFAULT_RUN_LIMIT = 50
DEFAULT_CHECKPOINT_LIMIT = 50
DEFAULT_EVENT_LIMIT = 100
#: Larger limits are clamped: one page must stay a bounded amount of work and memory.
MAX_LIMIT = 1000
#: Struct numbers are doubles; integers beyond this cannot be represented exactly.
MAX_SAFE_INTEGER = 2**53
#: The longest id (agentId, runId, blobId, eventType), idempotency key or filter id, in
#: bytes of UTF-8; the bridge's are 40-64 bytes. Every backend can index two of them
#: together: Postgres' B-tree entries stop at about 2.7 KB, and S3 keys (1024 bytes)
#: hold two ids in hex with room for a bucket prefix of about 170 bytes.
MAX_KEY_BYTES = 200
#: The longest cwd, in bytes of UTF-8: a path, indexed next to an agent id (Postgres)
#: or by its digest (S3).
MAX_CWD_BYTES = 2048
#: The longest list cursor, in characters. The longest this store issues (a run's:
#: kind, turnNumber and two ids of MAX_KEY_BYTES) is under 600.
MAX_CURSOR_LENGTH = 1024


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- field readers -------------------------------------------------------------------


def require_object(value: Any, field: str) -> Document:
    if not isinstance(value, dict):
        raise invalid_argument(f"{field} must be an object")
    return value


def optional_object(parent: Mapping[str, Any], key: str, field: str) -> Document:
    value = parent.get(key)
    if value is None:
        return {}
    return require_object(value, f"{field}.{key}")


def is_storable_key(value: str) -> bool:
    """Whether ``value`` can be an indexed key in every backend.

    Keys land in database columns, Redis members and S3 object names; none of them can
    hold NUL, and a lone UTF-16 surrogate (which JSON can carry) has no UTF-8 form.
    Document bodies can hold both; only keys are checked.
    """
    return "\x00" not in value and (value.isascii() or _encodes(value))


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_key(value: str, field: str, max_bytes: int) -> None:
    """``invalid_argument`` naming ``field`` unless ``value`` is a storable key that fits."""
    if value.isascii() and len(value) <= max_bytes and "\x00" not in value:
        return  # nearly every key: one pass over its characters, no call
    if not is_storable_key(value):
        raise invalid_argument(f"{field} must not contain NUL or unpaired surrogates")
    # len() is ASCII's size in UTF-8; is_storable_key has just checked the rest encodes.
    size = len(value) if value.isascii() else len(value.encode("utf-8"))
    if size > max_bytes:
        raise invalid_argument(f"{field} must be at most {max_bytes} bytes of UTF-8, not {size}")


def require_id(parent: Mapping[str, Any], key: str, field: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise invalid_argument(f"{field}.{key} must be a non-empty string")
    if not (value.isascii() and len(value) <= MAX_KEY_BYTES and "\x00" not in value):
        _check_key(value, f"{field}.{key}", MAX_KEY_BYTES)  # the field's name only now
    return value


def optional_string(
    parent: Mapping[str, Any], key: str, field: str, max_bytes: int | None = MAX_KEY_BYTES
) -> str | None:
    """An optional string used as a key or filter (cwd, idempotencyKey, payloadRef).

    ``max_bytes`` None: no length limit (a reference the stores never index).
    """
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_argument(f"{field}.{key} must be a string or null")
    if max_bytes is None:
        if not is_storable_key(value):
            raise invalid_argument(f"{field}.{key} must not contain NUL or unpaired surrogates")
    else:
        _check_key(value, f"{field}.{key}", max_bytes)
    return value


def as_integer(value: Any) -> int | None:
    """``value`` as an int if it is an integral JSON number, else None.

    Integral doubles count: the binary codec carries every number as a double.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def require_integer(parent: Mapping[str, Any], key: str, field: str) -> int:
    value = as_integer(parent.get(key))
    if value is None or abs(value) > MAX_SAFE_INTEGER:
        raise invalid_argument(f"{field}.{key} must be an integer")
    return value


def optional_limit(parent: Mapping[str, Any], field: str, default: int) -> int:
    raw = parent.get("limit")
    if raw is None:
        return default
    value = as_integer(raw)
    if value is None or value < 1:
        raise invalid_argument(f"{field}.limit must be a positive integer")
    return min(value, MAX_LIMIT)


def optional_id_list(parent: Mapping[str, Any], key: str, field: str) -> list[str] | None:
    """A list of ids as a filter; absent, null or empty means "match any" (None)."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid_argument(f"{field}.{key} must be a list of strings")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise invalid_argument(f"{field}.{key}[{index}] must be a non-empty string")
        _check_key(item, f"{field}.{key}[{index}]", MAX_KEY_BYTES)
    return list(dict.fromkeys(value)) or None


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
# A cursor is the sort key of the last item on the page, tagged with the substore it
# belongs to: its parts joined by NUL (which no id can hold) as unpadded base64url.
# Opaque to clients; a backend never sees it. Nothing in it is parsed as JSON, so no
# cursor can nest, and its integers are read as at most 16 decimal digits.

_CURSOR_SEPARATOR = "\x00"
_CURSOR_INTEGER = re.compile(r"-?[0-9]{1,16}")


def _encode_cursor(kind: str, *key: str | int) -> str:
    raw = _CURSOR_SEPARATOR.join([kind, *(str(part) for part in key)]).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode_cursor(cursor: Any, kind: str, field: str, parts: int) -> list[str]:
    """The ``parts`` strings after ``kind`` in ``cursor``; invalid_argument if it is not one."""
    problem = invalid_argument(f"{field}.cursor is not a cursor this store issued")
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_LENGTH or not cursor.isascii():
        raise problem
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = raw.decode("utf-8").split(_CURSOR_SEPARATOR)
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise problem from None
    if len(key) != parts + 1 or key[0] != kind:
        raise problem
    return key[1:]


def _cursor_integer(text: str, field: str) -> int:
    if _CURSOR_INTEGER.fullmatch(text) is None or abs(int(text)) > MAX_SAFE_INTEGER:
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    return int(text)


def _cursor_id(text: str, field: str) -> str:
    # A cursor only ever holds ids the store took, so these checks never fail for one
    # it issued.
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if not text or not is_storable_key(text) or size > MAX_KEY_BYTES:
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    return text


def agent_cursor(position: AgentPosition) -> str | None:
    """None if no cursor goes past the agent (:mod:`.sort_keys`): the listing ends."""
    at = sort_integer(position.updated_at, ascending=False, bound=MAX_SAFE_INTEGER)
    return None if at is None else _encode_cursor("agents", at, position.agent_id)


def run_cursor(position: RunPosition) -> str | None:
    """None if no cursor goes past the run (:mod:`.sort_keys`): the listing ends."""
    turn = sort_integer(position.turn_number, ascending=True, bound=MAX_SAFE_INTEGER)
    ids = (position.run_id, position.agent_id)
    return None if turn is None else _encode_cursor("runs", turn, *ids)


def blob_cursor(ref: BlobRef) -> str:
    return _encode_cursor("checkpoints", ref.blob_id, ref.agent_id)


def parse_agent_cursor(filter_: Mapping[str, Any], field: str) -> AgentPosition | None:
    if filter_.get("cursor") in (None, ""):
        return None
    updated_at, agent_id = _decode_cursor(filter_["cursor"], "agents", field, 2)
    return AgentPosition(
        updated_at=_cursor_integer(updated_at, field), agent_id=_cursor_id(agent_id, field)
    )


def parse_run_cursor(filter_: Mapping[str, Any], field: str) -> RunPosition | None:
    if filter_.get("cursor") in (None, ""):
        return None
    turn_number, run_id, agent_id = _decode_cursor(filter_["cursor"], "runs", field, 3)
    return RunPosition(
        turn_number=_cursor_integer(turn_number, field),
        run_id=_cursor_id(run_id, field),
        agent_id=_cursor_id(agent_id, field),
    )


def parse_blob_cursor(filter_: Mapping[str, Any], field: str) -> BlobRef | None:
    if filter_.get("cursor") in (None, ""):
        return None
    blob_id, agent_id = _decode_cursor(filter_["cursor"], "checkpoints", field, 2)
    return BlobRef(blob_id=_cursor_id(blob_id, field), agent_id=_cursor_id(agent_id, field))


def page(items: Sequence[Any], limit: int) -> tuple[list[Any], bool]:
    """Split a fetch of ``limit + 1`` rows into the page and whether more follow."""
    return list(items[:limit]), len(items) > limit
