"""Units on kept greenlets (bridge_store_sql.greenlets): what greenlet_spawn did, reused."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import weakref
from typing import Any

import pytest
from greenlet import getcurrent  # type: ignore[import-untyped]
from sqlalchemy.util import await_only

from bridge_store_sql import greenlets
from bridge_store_sql.greenlets import run_unit

REQUEST = contextvars.ContextVar("REQUEST", default="none")


class Payload:
    """Something a unit's closure holds, to see whether a parked worker keeps it."""


async def test_a_unit_awaits_through_await_only_and_returns_its_value() -> None:
    async def double(value: int) -> int:
        await asyncio.sleep(0)
        return value * 2

    def unit() -> int:
        return await_only(double(2)) + await_only(double(3))

    assert await run_unit(unit) == 10


async def test_consecutive_units_run_on_one_parked_worker() -> None:
    def which() -> Any:
        await_only(asyncio.sleep(0))
        return getcurrent()

    first = await run_unit(which)
    second = await run_unit(which)
    assert first is second
    assert first in greenlets._parked.workers


async def test_units_in_flight_together_each_get_a_worker() -> None:
    both_started = asyncio.Event()
    started: list[Any] = []

    async def wait_for_the_other() -> None:
        if len(started) == 2:
            both_started.set()
        await both_started.wait()

    def unit() -> Any:
        started.append(getcurrent())
        await_only(wait_for_the_other())
        return getcurrent()

    first, second = await asyncio.gather(run_unit(unit), run_unit(unit))
    assert first is not second
    assert started == [first, second]


async def test_an_error_reaches_the_caller_and_the_worker_serves_again() -> None:
    async def fail() -> None:
        await asyncio.sleep(0)
        raise LookupError("from the awaitable")

    def unit_raising_in_its_await() -> None:
        await_only(fail())

    def unit_raising_itself() -> None:
        raise KeyError("from the unit")

    with pytest.raises(LookupError, match="from the awaitable"):
        await run_unit(unit_raising_in_its_await)
    with pytest.raises(KeyError, match="from the unit"):
        await run_unit(unit_raising_itself)
    assert await run_unit(lambda: "after") == "after"


async def test_an_error_caught_in_the_unit_lets_it_go_on() -> None:
    async def fail() -> None:
        raise LookupError("caught")

    def unit() -> str:
        try:
            await_only(fail())
        except LookupError as error:
            return f"handled: {error}"
        return "not raised"

    assert await run_unit(unit) == "handled: caught"


async def test_cancelling_the_caller_cancels_the_unit_and_it_can_clean_up() -> None:
    cleaned: list[str] = []

    def unit() -> None:
        try:
            await_only(asyncio.sleep(60))
        except asyncio.CancelledError:
            cleaned.append("cancelled inside the unit")
            raise

    task = asyncio.ensure_future(run_unit(unit))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cancelled inside the unit"]
    assert await run_unit(lambda: "next") == "next"


async def test_a_unit_sees_its_callers_context_variables() -> None:
    async def in_request(name: str) -> str:
        REQUEST.set(name)
        return await run_unit(REQUEST.get)

    assert list(await asyncio.gather(in_request("a"), in_request("b"))) == ["a", "b"]
    assert await run_unit(REQUEST.get) == "none"


async def test_a_parked_worker_keeps_nothing_of_its_last_unit() -> None:
    def use(payload: Payload) -> int:
        await_only(asyncio.sleep(0))
        return id(payload)

    # A partial, not a closure: deleting a closure's variable would empty its cell
    # whoever still held the function.
    payload = Payload()
    held = weakref.ref(payload)
    await run_unit(functools.partial(use, payload))
    del payload
    gc.collect()
    assert held() is None

    returned = weakref.ref(await run_unit(Payload))
    gc.collect()
    assert returned() is None


async def test_no_more_workers_are_parked_than_the_bound() -> None:
    release = asyncio.Event()

    def unit() -> None:
        await_only(release.wait())

    tasks = [asyncio.ensure_future(run_unit(unit)) for _ in range(greenlets.MAX_PARKED + 8)]
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(*tasks)
    assert len(greenlets._parked.workers) == greenlets.MAX_PARKED
