"""Units of work on greenlets kept for the next unit, not made anew for each.

The Postgres units are plain functions that wait on asyncpg through SQLAlchemy's
``await_only``, which needs them to run in a greenlet it knows. SQLAlchemy's
``greenlet_spawn`` makes a new greenlet per unit; a greenlet's first frame then needs
a new block for Python's frame stack, which CPython 3.11 maps and unmaps per
greenlet (16 KiB: an ``mmap`` and a ``munmap`` a call, and the page faults of
touching it). On this VM that made ``greenlet_spawn`` of a function that does nothing
cost 10-12 µs. A worker greenlet here runs unit after unit, so its frame stack stays
mapped, and it is parked between units.

The protocol is ``greenlet_spawn``'s: the unit switches to its parent (the event
loop's greenlet) with an awaitable, the parent awaits it and switches back with its
result, or throws its exception in; the unit's end comes back as :class:`_Finished`.
A worker marks itself the way SQLAlchemy's own greenlets are marked, so
``await_only`` accepts it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from greenlet import getcurrent, greenlet  # type: ignore[import-untyped]

T = TypeVar("T")

#: Parked workers per thread at most: one per unit in flight at the same moment is
#: reused, beyond that they are let go (as many as the pools' connections would do).
MAX_PARKED = 64


class _Finished(Generic[T]):
    """A unit's end, as its worker hands it to the parent: its value or its error."""

    __slots__ = ("error", "value")

    def __init__(self, value: T | None, error: BaseException | None) -> None:
        self.value = value
        self.error = error


class _Worker(greenlet):  # type: ignore[misc]  # greenlet's class is not typed as a base
    # What SQLAlchemy's await_only looks for on the current greenlet.
    __sqlalchemy_greenlet_provider__ = True


def _serve(unit: Callable[[], Any] | None) -> None:
    """A worker's life: run the unit it was switched in with, hand back its end, repeat."""
    while unit is not None:
        try:
            finished: _Finished[Any] = _Finished(unit(), None)
        except BaseException as error:  # handed to the caller, who re-raises it
            finished = _Finished(None, error)
        # The unit's closure (its documents, its connection) is not kept while parked.
        unit = None
        unit = getcurrent().parent.switch(finished)


class _Parked(threading.local):
    def __init__(self) -> None:
        self.workers: list[_Worker] = []


_parked = _Parked()


async def run_unit(unit: Callable[[], T]) -> T:
    """``unit()`` in a worker greenlet, its ``await_only`` calls awaited here."""
    driver = getcurrent()
    workers = _parked.workers
    worker = workers.pop() if workers else None
    if worker is None or worker.dead or worker.parent is not driver:
        worker = _Worker(_serve, driver)
    # As greenlet_spawn does: the unit sees the context variables of the calling task.
    worker.gr_context = driver.gr_context
    outcome = worker.switch(unit)
    while not isinstance(outcome, _Finished):
        try:
            value = await outcome
        except BaseException:  # thrown into the unit, as greenlet_spawn does
            outcome = worker.throw(*sys.exc_info())
        else:
            outcome = worker.switch(value)
    worker.gr_context = None
    if len(workers) < MAX_PARKED:
        workers.append(worker)
    # The parked worker's frame still holds this outcome: it keeps neither part.
    value, error = outcome.value, outcome.error
    outcome.value = outcome.error = None
    if error is not None:
        raise error
    return value  # type: ignore[return-value]  # a unit's value, None included
