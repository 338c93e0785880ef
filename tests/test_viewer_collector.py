"""The overview holds Python's cycle collector off while it adds up, and only then."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from bridge_store.viewer.collector import collector_paused


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


@pytest.mark.usefixtures("collector_on")
async def test_overlapping_pages_keep_it_off_until_the_last_returns() -> None:
    first_in, second_in, first_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
    seen: list[bool] = []

    async def first() -> None:
        with collector_paused():
            first_in.set()
            await second_in.wait()
        first_out.set()

    async def second() -> None:
        await first_in.wait()
        with collector_paused():
            second_in.set()
            await first_out.wait()
            seen.append(gc.isenabled())  # the first page is done, this one is not
        seen.append(gc.isenabled())

    await asyncio.gather(first(), second())
    assert seen == [False, True]


@pytest.mark.usefixtures("collector_on")
def test_an_error_turns_it_back_on() -> None:
    seen: list[bool] = []

    def page() -> None:
        with collector_paused():
            seen.append(gc.isenabled())
            raise ValueError("page failed")

    with pytest.raises(ValueError, match="page failed"):
        page()
    assert seen == [False]
    assert gc.isenabled()


def test_it_is_left_off_when_it_was_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
