"""Redis backend speed: appends, tail reads and listing.

Runs in-process against the machine's Redis under a throwaway key prefix
(``testkit.services``, deleted at the end), without HTTP, so the numbers are the backend's own cost:

    python -m bench redis-events [--events 100000]

1. appends: one run, one at a time (latency) and 64 in flight (throughput); 64 in
   flight spread over 16 runs.
2. tail reads: ``runEvents.list`` after the last-but-ten seq of a long log, as the
   bridge polls while a run streams.
3. agents and runs pages: the first page and a page deep into 10,000 rows.

Why run event logs are sorted sets (the comparison with a stream and a list) is in
docs/redis.md, with the commit it was measured at.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import AgentPosition, RunPosition
from bridge_store.rpc.contract import now_ms
from bridge_store_redis.backend import RedisBackend
from testkit.services import REDIS_URL, redis_prefix

PAYLOAD = {"type": "assistant_delta", "text": "x" * 160}


def event(run_id: str) -> dict[str, Any]:
    return {
        "runId": run_id,
        "eventType": "run_stream_event",
        "payload": PAYLOAD,
        "payloadRef": None,
        "idempotencyKey": None,
        "createdAt": now_ms(),
    }


async def timed(calls: int, make: Callable[[int], Awaitable[Any]]) -> list[float]:
    """Latency of each of ``calls`` sequential calls, in milliseconds."""
    latencies = []
    for index in range(calls):
        start = time.perf_counter()
        await make(index)
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"p50 {statistics.median(ordered):.3f} ms, p99 {p99:.3f} ms"


async def concurrent(total: int, in_flight: int, make: Callable[[int], Awaitable[Any]]) -> float:
    """Calls per second with ``in_flight`` calls outstanding at any time."""
    gate = asyncio.Semaphore(in_flight)

    async def one(index: int) -> None:
        async with gate:
            await make(index)

    start = time.perf_counter()
    await asyncio.gather(*(one(index) for index in range(total)))
    return total / (time.perf_counter() - start)


async def bench_backend(backend: RedisBackend, events: int) -> None:
    store = backend.run_events
    latencies = await timed(2000, lambda _: store.append("default", event("seq")))
    print(f"append, one at a time: {summary(latencies)}")
    rate = await concurrent(20000, 64, lambda _: store.append("default", event("hot")))
    print(f"append, 64 in flight on one run: {rate:,.0f}/s")
    rate = await concurrent(20000, 64, lambda n: store.append("default", event(f"spread-{n % 16}")))
    print(f"append, 64 in flight over 16 runs: {rate:,.0f}/s")

    remaining = events - 20000
    await concurrent(remaining, 64, lambda _: store.append("default", event("hot")))
    latencies = await timed(
        2000, lambda _: store.list("default", "hot", after_seq=events - 10, limit=101)
    )
    print(f"tail read (10 new events) of a {events:,}-event log: {summary(latencies)}")
    latencies = await timed(
        500, lambda _: store.list("default", "hot", after_seq=events // 2, limit=101)
    )
    print(f"read 100 events from the middle of it: {summary(latencies)}")

    for index in range(10000):
        await backend.agents.create(
            "default",
            {"agentId": f"agent-{index:05d}", "cwd": f"/w/{index % 10}", "updatedAt": index},
        )
        await backend.runs.create(
            "default",
            {
                "runId": f"run-{index:05d}",
                "agentId": f"agent-{index % 100:05d}",
                "turnNumber": index,
            },
        )
    deep = AgentPosition(updated_at=5000, agent_id="agent-05000")
    latencies = await timed(
        300, lambda _: backend.agents.list("default", cwd=None, after=None, limit=51)
    )
    print(f"agents page of 50 of 10,000, first: {summary(latencies)}")
    latencies = await timed(
        300, lambda _: backend.agents.list("default", cwd=None, after=deep, limit=51)
    )
    print(f"agents page of 50 of 10,000, deep: {summary(latencies)}")
    latencies = await timed(
        300, lambda _: backend.agents.list("default", cwd="/w/3", after=None, limit=51)
    )
    print(f"agents page of 50 of one cwd (1,000 of 10,000): {summary(latencies)}")
    deep_run = RunPosition(turn_number=5000, run_id="run-05000", agent_id="agent-00000")
    latencies = await timed(
        300,
        lambda _: backend.runs.list(
            "default", agent_ids=None, run_ids=None, after=deep_run, limit=51
        ),
    )
    print(f"runs page of 50 of 10,000, deep: {summary(latencies)}")
    latencies = await timed(
        300,
        lambda _: backend.runs.list(
            "default", agent_ids=["agent-00042"], run_ids=None, after=None, limit=51
        ),
    )
    print(f"runs page of one agent (100 runs): {summary(latencies)}")


async def bench(url: str, events: int) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, RedisBackend)
    client = aioredis.Redis.from_url(REDIS_URL)
    await backend.start(migrate=True)
    try:
        info = await client.info("server")
        print(f"Redis {info['redis_version']}, {url}")
        await bench_backend(backend, events)
    finally:
        await backend.close()
        await client.aclose()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench redis-events", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args(argv)
    with redis_prefix() as url:
        asyncio.run(bench(url, args.events))
    return 0
