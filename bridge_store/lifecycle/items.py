"""The records a store's history streams as, whatever reads or writes them.

Documents are exactly what the backend API returns (an opened store: sdkMetadata and
blobs in the clear when the store is sealed). Agents and runs may carry who created
them (the token name the store recorded beside the document, see
:mod:`bridge_store.backend.substores`), which a copy keeps. Events keep their ``seq``, ``offset``,
``createdAt`` and ``idempotencyKey``. A blob carries a way to read its bytes, not the
bytes, so a stream of them never holds more than the one being written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from bridge_store.backend.substores import SubstoreName
from bridge_store.types import Document
from bridge_store.wire import jsontext


@dataclass(frozen=True, slots=True)
class AgentItem:
    tenant: str
    document: Document
    #: The name of the token that created the agent; None when none is recorded or read.
    creator: str | None = None


@dataclass(frozen=True, slots=True)
class RunItem:
    tenant: str
    document: Document
    #: The name of the token that started the run; None when none is recorded or read.
    creator: str | None = None


@dataclass(frozen=True, slots=True)
class EventsItem:
    """Consecutive stored events of one run (a page: the run may have more)."""

    tenant: str
    run_id: str
    events: Sequence[Document]


#: Reads a blob's bytes when it is written; None when it vanished since it was listed.
BlobReader: TypeAlias = Callable[[], Awaitable[bytes | None]]


@dataclass(frozen=True, slots=True)
class BlobItem:
    tenant: str
    agent_id: str
    blob_id: str
    read: BlobReader


Item: TypeAlias = AgentItem | RunItem | EventsItem | BlobItem


def substore_of(item: Item) -> SubstoreName:
    if isinstance(item, AgentItem):
        return "agents"
    if isinstance(item, RunItem):
        return "runs"
    if isinstance(item, EventsItem):
        return "runEvents"
    return "checkpoints"


def canonical(value: Any) -> bytes:
    """``value`` as JSON that two equal documents share, byte for byte.

    Compared as text, not as Python values: ``1``, ``1.0`` and ``True`` are equal in
    Python but are different documents, and ``-0.0`` must keep its sign.
    """
    return jsontext.dumps(_sorted(value))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
