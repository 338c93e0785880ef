"""The S3 backend's hot paths, through the contract layer, against a local moto server.

    python -m bench s3-backend

Starts the tests' S3 server (moto with requests serialised, as S3's conditional writes
are atomic; ``testkit.services.S3Server``) in a subprocess, then measures wall time and this
process's CPU time per call: appends (one at a time, 200 at once, and two processes
racing on one run), the bridge's empty poll, list pages and a 32 MiB checkpoint blob
given to the backend as bytes (in a fresh child process, with how far its RSS peaks
above the level before each call; Linux /proc).

moto answers a request in a few milliseconds of Python; real S3 answers in roughly
10-30 ms of network round trip, so absolute latencies here are not S3's. The request
counts (tests/test_s3_backend.py pins them) and the client CPU carry over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.servers import ROOT, start_child
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, agent, run
from bridge_store.stack.stores import Routes, open_stores
from testkit.services import s3_store_url


async def timed(
    results: dict[str, Any], name: str, count: int, work: Callable[[], Awaitable[Any]]
) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    results[name] = {
        "ms_wall": (time.perf_counter() - wall) * 1000 / count,
        "ms_cpu": (time.process_time() - cpu) * 1000 / count,
    }


async def with_client(url: str, work: Callable[[StoreClient], Awaitable[Any]]) -> Any:
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        return await work(StoreClient(stores=opened.stores, manager=manager))
    finally:
        await opened.close()


async def hot_paths(url: str) -> dict[str, Any]:
    results: dict[str, Any] = {}

    async def work(client: StoreClient) -> None:
        async def append(run_id: str, index: int) -> Any:
            return await client.call(
                "runEvents", "append", {"runId": run_id, "eventType": "t", "payload": index}
            )

        async def sequential() -> None:
            for index in range(200):
                await append("seq", index)

        await timed(results, "append, one at a time", 200, sequential)

        async def burst() -> None:
            await asyncio.gather(*(append("burst", index) for index in range(200)))

        await timed(results, "append, 200 at once (one run)", 200, burst)

        async def keyed() -> None:
            for index in range(100):
                await client.call(
                    "runEvents",
                    "append",
                    {"runId": "keyed", "eventType": "t", "idempotencyKey": f"k{index}"},
                )

        await timed(results, "append with idempotencyKey", 100, keyed)

        async def polls() -> None:
            for _ in range(100):
                await client.call("runEvents", "list", {"runId": "seq", "afterOffset": "200"})

        await timed(results, "list events, nothing new (poll)", 100, polls)

        async def event_pages() -> None:
            for offset in range(0, 200, 100):
                await client.call("runEvents", "list", {"runId": "seq", "afterOffset": str(offset)})

        await timed(results, "list events, page of 100", 2, event_pages)

        for index in range(200):
            await client.call(
                "agents", "create", {"agent": agent(f"a{index:03d}", updated_at=index)}
            )
            await client.call("runs", "create", {"run": run(f"r{index:03d}", f"a{index % 10:03d}")})

        async def agent_pages() -> None:
            for _ in range(10):
                await client.call("agents", "list", {})

        await timed(results, "list agents, page of 50", 10, agent_pages)

        async def agent_updates() -> None:
            for index in range(50):
                await client.call(
                    "agents", "update", {"agent": agent(f"a{index:03d}", updated_at=1000 + index)}
                )

        await timed(results, "update agent", 50, agent_updates)

        async def run_pages() -> None:
            for index in range(10):
                await client.call("runs", "list", {"filter": {"agentIds": [f"a{index:03d}"]}})

        await timed(results, "list runs of one agent (20 runs)", 10, run_pages)

    await with_client(url, work)
    return results


async def racing_appender(url: str, count: int) -> dict[str, Any]:
    async def work(client: StoreClient) -> dict[str, Any]:
        seqs = []
        started = time.perf_counter()
        for index in range(count):
            event = await client.call(
                "runEvents", "append", {"runId": "race", "eventType": "t", "payload": index}
            )
            seqs.append(event["seq"])
        return {"seqs": seqs, "seconds": time.perf_counter() - started}

    result: dict[str, Any] = await with_client(url, work)
    return result


async def big_blob(url: str) -> dict[str, Any]:
    """The backend alone (bytes in, bytes out): what it holds beyond the blob itself."""
    blob = os.urandom(32 * 1024 * 1024)
    results: dict[str, Any] = {}
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=True)
    checkpoints = opened.stores.checkpoints
    try:

        async def create() -> None:
            await checkpoints.create("default", "a", "big", blob)

        growth = await peak_growth(lambda: timed(results, "checkpoint create, 32 MiB", 1, create))
        results["32 MiB create: peak RSS above the blob (MiB)"] = growth
        stored: list[bytes | None] = []

        async def get() -> None:
            stored.append(await checkpoints.get("default", "a", "big"))

        growth = await peak_growth(lambda: timed(results, "checkpoint get, 32 MiB", 1, get))
        results["32 MiB get: peak RSS growth (MiB), the returned bytes included"] = growth
        assert stored == [blob]
    finally:
        await opened.close()
    return results


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # sets VmHWM back to the current RSS


async def peak_growth(work: Callable[[], Awaitable[Any]]) -> float:
    """How far RSS rose above its level before ``work``, in MiB (Linux)."""
    _reset_peak_rss()
    before = _status_kib("VmRSS")
    await work()
    return (_status_kib("VmHWM") - before) / 1024


def child(mode: str, url: str) -> Any:
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "s3-backend", "--child", mode, url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench s3-backend", description=__doc__.split("\n")[0]
    )
    # How the bench runs its own child processes: a racing appender, a big blob.
    parser.add_argument("--child", nargs=2, metavar=("MODE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        mode, url = args.child
        if mode == "race":
            print(json.dumps(asyncio.run(racing_appender(url, 150))))
        elif mode == "blob":
            print(json.dumps(asyncio.run(big_blob(url))))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-s3-") as directory:
        server = start_child("s3", "", Path(directory) / "s3.log")
        endpoint = server.ready["url"]
        try:
            results = asyncio.run(hot_paths(s3_store_url(endpoint, "bench-hot/")))
            race_url = s3_store_url(endpoint, "bench-race/")
            racers = [
                subprocess.Popen(
                    [sys.executable, "-m", "bench", "s3-backend", "--child", "race", race_url],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(2)
            ]
            reports = [json.loads(racer.communicate()[0]) for racer in racers]
            seqs = sorted(seq for report in reports for seq in report["seqs"])
            assert seqs == list(range(1, len(seqs) + 1)), "gap or duplicate in raced seqs"
            elapsed = max(report["seconds"] for report in reports)
            results["2 processes x 150 appends on one run: appends/s"] = len(seqs) / elapsed
            results.update(child("blob", s3_store_url(endpoint, "bench-blob/")))
        finally:
            server.stop()

    print(f"{'operation':<64}{'wall ms':>10}{'cpu ms':>10}")
    for name, value in results.items():
        if isinstance(value, dict):
            print(f"{name:<64}{value['ms_wall']:>10.2f}{value['ms_cpu']:>10.2f}")
        else:
            print(f"{name:<64}{value:>10.1f}")
    return 0
