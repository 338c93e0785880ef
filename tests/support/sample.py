"""The demo's sample team history (``bridge_store.demo``) in a store of a test's own.

What ``bridge-store demo`` serves, written the same way (the import path, creators
kept), with its times counted back from a fixed moment so pages and exports are the
same on every run. For tests that need a realistic store: ten agents in two tenants,
every message type, failed and cancelled runs, a run of about 3,500 events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools

from bridge_store.demo.fill import write
from bridge_store.demo.history import SampleHistory, sample_history
from bridge_store.stack.stores import Routes, StoreStack

#: 2027-01-15 08:00 UTC: the sample's "now".
NOW = 1_800_000_000_000


@functools.cache
def sample() -> SampleHistory:
    return sample_history(now_ms=NOW)


def write_sample(url: str) -> SampleHistory:
    """Write the sample into the store at ``url`` (its schema made first); the sample."""

    async def main() -> None:
        async with StoreStack.of(Routes.single(url)).opened(migrate=True) as stack:
            await write(stack.stores, sample())

    # In a thread of its own: a caller may run an event loop already (Playwright's).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        worker.submit(asyncio.run, main()).result()
    return sample()
