"""``bridge-store demo``'s wait before it serves: the sample history generated and written.

Generates the sample (bridge_store.demo: ten agents, about 3,900 events, one of them a
run of 3,500), opens a fresh store with its schema, and writes the sample through the
same stack the demo uses, REPEAT times, each into a new store. Prints each step's
seconds and exits 1 when a write took longer than the target: the demo promises to
be serving within a few seconds of its start::

    python -m bench demo-fill                        # SQLite in a temporary directory
    python -m bench demo-fill --store memory:// --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from bridge_store.demo.fill import write
from bridge_store.demo.history import sample_history
from bridge_store.stack.stores import Routes, StoreStack

#: The longest a write of the sample may take on SQLite (the demo's promise, with
#: room for a busy machine), seconds.
TARGET_SECONDS = 5.0


async def fill_once(url: str) -> tuple[float, float, float, int]:
    """Seconds to generate the sample, to open the store, to write it; the events written."""
    started = time.perf_counter()
    sample = sample_history()
    generated = time.perf_counter()
    async with StoreStack.of(Routes.single(url)).opened(migrate=True) as stack:
        opened = time.perf_counter()
        tally = await write(stack.stores, sample)
        written = time.perf_counter()
    return generated - started, opened - generated, written - opened, tally.items("runEvents")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench demo-fill", description=__doc__)
    parser.add_argument("--store", help="store URL for every round (default: a new SQLite file)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds, each into a new store")
    args = parser.parse_args(argv)
    writes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as directory:
        for round_number in range(args.repeat):
            url = args.store or f"sqlite:///{os.path.join(directory, f'demo-{round_number}.db')}"
            generate, open_, write_, events = asyncio.run(fill_once(url))
            writes.append(write_)
            print(
                f"{url.split(':', 1)[0]:8} generate {generate:5.2f} s | open {open_:5.2f} s | "
                f"write {write_:5.2f} s ({events:,} events, {events / write_:,.0f} events/s)"
            )
    median = statistics.median(writes)
    print(f"write: median {median:.2f} s, worst {max(writes):.2f} s (target {TARGET_SECONDS:g} s)")
    return 0 if max(writes) <= TARGET_SECONDS else 1
