"""Types shared across the package."""

from __future__ import annotations

from typing import Any, TypeAlias

#: A JSON object as decoded by ``json.loads``: a stored agent, run or event.
Document: TypeAlias = dict[str, Any]

#: What a CallStore call answers: its output (None: null) and whether gzip may shrink
#: it (False for checkpoint blobs, see ``dispatch``). A plain tuple: it is made for
#: every call, and a NamedTuple costs ten times as much to build.
Answer: TypeAlias = tuple[Document | None, bool]
