"""Type aliases shared across the package."""

from __future__ import annotations

from typing import Any, TypeAlias

#: A JSON object as decoded by ``json.loads``: a stored agent, run or event.
Document: TypeAlias = dict[str, Any]
