"""bench/scaling.py loads what its pages expect, on the backends that need no server.

The bench checks every page's item count against the data it loaded, so a run on a
small store proves the loaders and the keyset positions agree with the backends.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.scaling import MemoryTarget, SqliteTarget, Target, measure


@pytest.mark.parametrize("make", [MemoryTarget, SqliteTarget])
def test_every_page_returns_what_was_loaded(make: type[Target]) -> None:
    targets = [make(), make()]
    try:
        result = asyncio.run(measure(targets, [(120, 150), (400, 500)], repeat=1))
    finally:
        for target in targets:
            target.cleanup()
    small, large = result.p50_ms
    assert set(small) == set(large)
    assert "events mid" in small
    assert result.scales == [(120, 150), (400, 500)]
