"""The checkout a bridge works in, carried in the path of its store URL.

The server cannot see a developer's disk, and the bridge sends nothing but CallStore
calls. It does keep the path of its ``--store-callback-url``: told
``http://store:8787/w/<segment>/`` it posts to
``/w/<segment>/sdk.v1.SdkStoreCallbackService/CallStore``. The segment is the
checkout (workspace id and root), as base64url of a small JSON object: opaque in the
URL, bounded, and checked like any input (a bad one is ``invalid_argument``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import invalid_argument
from .paths import AS_STORED, Checkout, check_root, check_workspace_id

#: The path prefix under which a CallStore URL carries a checkout.
PREFIX = "/w/"
#: The longest segment accepted, in characters: an id and a root at their bounds fit.
MAX_SEGMENT_CHARS = 4096
_VERSION = 1
#: The ASGI scope key under which the app hands the CallStore endpoint a request's
#: segment, which is decoded only once the caller is known (:func:`checkout_in`).
SCOPE_KEY = "bridge_store.workspace_segment"
#: The segment of a reader that wants agents as stored (:data:`.paths.AS_STORED`).
AS_STORED_SEGMENT = "keys"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def encode(checkout: Checkout) -> str:
    """The URL path segment that carries ``checkout``."""
    text = json.dumps(
        {"v": _VERSION, "w": checkout.workspace, "r": checkout.root},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def decode(segment: str) -> Checkout:
    """The checkout a segment carries (:data:`.paths.AS_STORED` for
    :data:`AS_STORED_SEGMENT`); invalid_argument for anything else."""
    if segment == AS_STORED_SEGMENT:
        return AS_STORED
    if not 0 < len(segment) <= MAX_SEGMENT_CHARS or not _BASE64URL.fullmatch(segment):
        raise invalid_argument(
            f"the store URL's workspace segment must be 1 to {MAX_SEGMENT_CHARS} "
            "base64url characters (print one with `bridge-store workspace-url`)"
        )
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        raise invalid_argument(
            "the store URL's workspace segment is not one bridge-store made"
        ) from None
    if (
        not isinstance(data, dict)
        or set(data) != {"v", "w", "r"}
        or data["v"] != _VERSION
        or not isinstance(data["w"], str)
        or not isinstance(data["r"], str)
    ):
        raise invalid_argument("the store URL's workspace segment is not one bridge-store made")
    return Checkout(check_workspace_id(data["w"]), check_root(data["r"]))


def checkout_in(scope: Mapping[str, Any]) -> Checkout | None:
    """The checkout a request's store URL names (None: the plain CallStore path)."""
    segment = scope.get(SCOPE_KEY)
    return None if segment is None else decode(segment)


def store_url(base: str, checkout: Checkout) -> str:
    """The store URL (``base`` ends in ``/``) a bridge working in ``checkout`` is given."""
    return f"{base}{PREFIX.lstrip('/')}{encode(checkout)}/"


def split_path(path: str, call_path: str) -> str | None:
    """The segment of ``/w/<segment><call_path>``; None for any other path."""
    if not path.startswith(PREFIX) or not path.endswith(call_path):
        return None
    segment = path[len(PREFIX) : len(path) - len(call_path)]
    return segment if "/" not in segment else None
