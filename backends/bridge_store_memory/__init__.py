"""The in-memory reference backend (``memory://``): every substore, nothing persisted.

It is the executable reading of the contract: the conformance suite runs against it
first, and it serves tests and throwaway local runs.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from bridge_store import hookimpl
from bridge_store.errors import ConfigurationError

from .backend import MemoryBackend

__all__ = ["MemoryBackend"]


@hookimpl
def bridge_store_url_schemes() -> list[str]:
    return ["memory"]


@hookimpl
def bridge_store_open_backend(url: str) -> MemoryBackend | None:
    parts = urlsplit(url)
    if parts.scheme != "memory":
        return None
    if parts.query:
        raise ConfigurationError("memory:// takes no parameters")
    return MemoryBackend()
