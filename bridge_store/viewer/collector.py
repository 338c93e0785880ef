"""Python's cycle collector held off while a page adds up tens of thousands of rows.

An overview of a month over a store of a million runs a year makes some 300,000
small objects (each run's duration, each agent's share of a span, their sums) within
a few hundred milliseconds. Each is counted toward the collector's thresholds, so
it runs over and over while they are made, and its full passes walk every object
the process holds: measured on Postgres, half of the page's time (4.2 s for three
pages, 2.2 s with the collector held off). Reference counting still frees every one
of them as soon as it is dropped; only cycles wait, until the last page still adding
up is done (every read a page waits on is bounded, so the pause is too).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Pages inside :func:`collector_paused` at this moment (the event loop's tasks).
_inside = 0


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off until the last page inside this returns; left alone when it
    was already off for another reason."""
    global _inside
    if _inside == 0 and not gc.isenabled():
        yield
        return
    _inside += 1
    gc.disable()
    try:
        yield
    finally:
        _inside -= 1
        if _inside == 0:
            gc.enable()
