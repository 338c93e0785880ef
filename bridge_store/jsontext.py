"""Fast JSON for documents and bodies: orjson, with the standard library as fallback.

orjson parses and prints about four times faster than the standard library, which
matters on paths taken for every streamed agent message. What it refuses (lone
surrogates, integers beyond 64 bits on the way out; NaN, overflowing numbers and lone
surrogates on the way in) goes through the standard library, so the same values are
accepted and the same errors raised as before. Output is compact JSON either way;
orjson leaves non-ASCII characters unescaped (valid UTF-8), the fallback escapes them.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any, *, allow_nan: bool = True) -> bytes:
    """Compact JSON as UTF-8 bytes; ``allow_nan`` as in ``json.dumps``, for the fallback."""
    try:
        return orjson.dumps(value)
    except TypeError:
        # ensure_ascii escapes lone surrogates, which have no UTF-8 form.
        return json.dumps(value, separators=(",", ":"), allow_nan=allow_nan).encode("ascii")


def dumps_text(value: Any) -> str:
    """Compact JSON as a str."""
    return dumps(value).decode("utf-8")


def loads(data: str | bytes | bytearray) -> Any:
    """Parse JSON; invalid input raises ``json.JSONDecodeError`` as ``json.loads`` does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
