"""The rules for the fields of CallStore inputs that every layer shares: ids and other
keys every backend can index, integers a JSON number holds exactly, limits.

The request path (:mod:`bridge_store.rpc.contract`) reads each input's fields with
these, and the backend API (:mod:`bridge_store.backend`) checks what it stores and
reads back by the same rules; each answers ``invalid_argument`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import invalid_argument
from ..types import Document

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
