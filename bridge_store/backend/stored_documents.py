"""The contract's checks for documents that arrive already stored.

An archive, a bridge's own store or another store hands over documents as a store
holds them, not as a CallStore call carries them: they did not pass the JSON codec,
and events come with the ``seq``, ``offset`` and ``createdAt`` a store assigned. Before
such a document is stored it must pass what a call carrying it would have to: the
codec's rules on JSON values (:func:`check_json_value`) and :mod:`bridge_store.rpc.contract`'s
on documents (``validate_agent``, ``validate_run``, and :func:`validate_stored_event`
here, which is ``new_event``'s checks plus the store-assigned fields).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import invalid_argument
from ..types import Document
from ..wire._codecs import MAX_DEPTH
from ..wire.fields import optional_string, require_id, require_integer, require_object


def validate_stored_event(value: Any, field: str) -> Document:
    """A stored event (as runEvents.list returns it and restore takes it), checked: the
    fields ``new_event`` checks, a positive ``seq``, ``offset`` its decimal text and an
    integer ``createdAt``. Integral doubles become integers, as in the contract."""
    event = dict(require_object(value, field))
    require_id(event, "runId", field)
    require_id(event, "eventType", field)
    optional_string(event, "payloadRef", field, max_bytes=None)
    if optional_string(event, "idempotencyKey", field) == "":
        raise invalid_argument(f"{field}.idempotencyKey must be a non-empty string or null")
    seq = event["seq"] = require_integer(event, "seq", field)
    if seq < 1:
        raise invalid_argument(f"{field}.seq must be a positive integer")
    if event.get("offset") != str(seq):
        raise invalid_argument(f"{field}.offset must be the decimal text of its seq")
    event["createdAt"] = require_integer(event, "createdAt", field)
    return event


def check_json_value(value: Any, field: str, depth: int = 0) -> None:
    """``invalid_argument`` unless ``value`` is what the CallStore JSON codec lets
    through: JSON types only, no NaN or infinity, and nesting no deeper than
    :data:`~bridge_store.wire._codecs.MAX_DEPTH` counted from a call's ``input``
    (``depth``: where ``value`` sits in it, 1 for ``input.agent``).

    Iterative, as the codec's depth check is: a recursive walk would hit the recursion
    limit it guards.
    """
    stack: list[tuple[Any, int]] = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                raise invalid_argument(f"{field} holds an object key that is not a string")
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise invalid_argument(f"{field} holds a number JSON cannot carry ({item})")
            continue
        elif item is None or isinstance(item, str | int):  # bool is an int
            continue
        else:
            raise invalid_argument(f"{field} holds a {type(item).__name__}, not a JSON value")
        if level >= MAX_DEPTH:
            raise invalid_argument(f"{field} nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, level + 1) for child in children)
