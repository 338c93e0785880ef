"""bench/scaling.py loads what its pages expect, on the backends that need no server.

The bench checks every page's item count against the data it loaded, so a run on a
small store proves the loaders and the keyset positions agree with the backends.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.scaling import Result, measure
from bench.scaling_targets import MemoryTarget, SqliteTarget, Target
from bridge_store.backend.substores import Backend

#: Every page the bench times (its module docstring lists them).
PAGES = {
    "agents first",
    "agents mid",
    "agents cwd first",
    "agents cwd mid",
    "runs first",
    "runs mid",
    "runs agent first",
    "runs agent mid",
    "runs by id",
    "events first",
    "events mid",
    "events poll at end",
}
SCALES = [(120, 150), (400, 500)]


def run_measure(make: type[Target]) -> Result:
    targets = [make(), make()]
    try:
        return asyncio.run(measure(targets, SCALES, repeat=1))
    finally:
        for target in targets:
            target.cleanup()


@pytest.mark.parametrize("make", [MemoryTarget, SqliteTarget])
def test_every_page_returns_what_was_loaded(make: type[Target]) -> None:
    # measure() raises when a page returns another item count than the loaded data
    # gives; completing means every page below matched, on both stores.
    small, large = run_measure(make).p50_ms
    assert set(small) == set(large) == PAGES


@pytest.mark.parametrize("make", [MemoryTarget, SqliteTarget])
def test_a_store_short_of_one_row_fails_the_page_checks(make: type[Target]) -> None:
    class ShortOfOneRow(make):  # type: ignore[valid-type,misc]
        async def load_rows(self, backend: Backend, start: int, stop: int) -> None:
            await super().load_rows(backend, start + 1, stop)

    with pytest.raises(AssertionError, match=r"items, expected"):
        run_measure(ShortOfOneRow)
