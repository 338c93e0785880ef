"""What the suite keeps between runs: a directory, and a lock for filling it.

``$BRIDGE_STORE_TEST_CACHE``, by default ``~/.cache/bridge-store-tests``, holds the
venvs of the tested cursor-sdk versions (sdk_versions.py) and the wheelhouse the
packaging test installs from. Engineers share a machine, so several test sessions
may fill it at once: :func:`locked` makes one do the work while the others wait.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

CACHE_ENV = "BRIDGE_STORE_TEST_CACHE"


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bridge-store-tests"


@contextlib.contextmanager
def locked(name: str) -> Iterator[Path]:
    """Hold the cache's lock called ``name``; yields the cache directory."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield root
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
