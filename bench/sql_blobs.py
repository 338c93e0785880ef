"""Large checkpoint blobs on the SQL backend: time and Python memory per create / get.

Peak memory is what ``tracemalloc`` sees allocated on top of the blob the caller
already holds, during one ``checkpoints.create`` and one ``checkpoints.get``, so
"1.0x" means the backend made one copy of the blob on the way (into the driver's
buffer, or out of it into the returned ``bytes``).

    python -m bench sql-blobs --mib 32
    python -m bench sql-blobs --store postgresql://postgres@127.0.0.1/some_db --mib 64

Without ``--store`` it runs SQLite in a temporary directory and Postgres in a fresh
database (``testkit.services``, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store_sql.backend import SqlBackend
from testkit.services import postgres_database


async def measure(operation: Callable[[], Awaitable[Any]]) -> tuple[float, int, Any]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    started = time.perf_counter()
    result = await operation()
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak, result


async def bench(url: str, mib: int) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)
    blob = os.urandom(mib * 1024 * 1024)
    try:
        # Warm the connection and its prepared statements with a small blob first.
        await backend.checkpoints.create("default", "warm", "b", b"x")
        await backend.checkpoints.get("default", "warm", "b")
        created, create_peak, _ = await measure(
            lambda: backend.checkpoints.create("default", "a", "b", blob)
        )
        fetched, get_peak, stored = await measure(
            lambda: backend.checkpoints.get("default", "a", "b")
        )
        assert stored == blob
        print(
            f"{backend.db.dialect}: {mib} MiB   create {created * 1000:7.1f} ms, "
            f"peak {create_peak / len(blob):.1f}x   get {fetched * 1000:7.1f} ms, "
            f"peak {get_peak / len(blob):.1f}x"
        )
    finally:
        await backend.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench sql-blobs", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--store", help="a sqlite:// or postgresql:// URL")
    parser.add_argument("--mib", type=int, default=32)
    args = parser.parse_args(argv)
    if args.store:
        asyncio.run(bench(args.store, args.mib))
        return 0
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(bench(f"sqlite:///{directory}/bench.db", args.mib))
    with postgres_database() as url:
        asyncio.run(bench(url, args.mib))
    return 0
