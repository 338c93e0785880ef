"""List cursors as clients see them: opaque strings this store issues and reads back,
and the backends' own list positions (:mod:`bridge_store.backend.history`) too."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ..errors import invalid_argument
from .fields import MAX_CURSOR_LENGTH, MAX_KEY_BYTES, MAX_SAFE_INTEGER, is_storable_key

# A cursor is the sort key of the last item on the page, tagged with the substore it
# belongs to: its parts joined by NUL (which no id can hold) as unpadded base64url.
# Opaque to clients; a backend never sees it. Nothing in it is parsed as JSON, so no
# cursor can nest, and its integers are read as at most 16 decimal digits.

_CURSOR_SEPARATOR = "\x00"
_CURSOR_INTEGER = re.compile(r"-?[0-9]{1,16}")


def encode_cursor(kind: str, *key: str | int) -> str:
    raw = _CURSOR_SEPARATOR.join([kind, *(str(part) for part in key)]).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: Any, kind: str, field: str, parts: int) -> list[str]:
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


def cursor_integer(text: str, field: str) -> int:
    if _CURSOR_INTEGER.fullmatch(text) is None or abs(int(text)) > MAX_SAFE_INTEGER:
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    return int(text)


def cursor_id(text: str, field: str) -> str:
    # A cursor only ever holds ids the store took, so these checks never fail for one
    # it issued.
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if not text or not is_storable_key(text) or size > MAX_KEY_BYTES:
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    return text
