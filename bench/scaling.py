"""List page latency against table size, per backend: does a page cost O(page)?

    python -m bench scaling [--backends memory,sqlite,postgres,redis,s3]
                            [--small 1000] [--large 100000] [--events 1000000]

For each backend one store is filled with ``--small`` agents and runs (and a run with
``--small`` events), another with ``--large`` rows (and a run with ``--events``
events), then every list page below is timed on both, the calls alternating between
the two stores so that load from elsewhere on the machine hits both alike. The figure
is the median of ``--repeat`` calls of one page through the backend's substore API
(the calls the contract layer makes: ``limit`` is the page size plus one), and the
ratio large/small should stay near 1.

Pages: agents newest first, from a cursor half way down the keyset, and both again
filtered by one ``cwd`` (a tenth of the agents); runs in list order, from a cursor
half way, of one agent (a tenth of the runs) first and half way, and by one run id;
events of one run from offset 0, from the middle, and the "nothing new" poll at its
end.

Rows are loaded the fast way for each backend (``bench/scaling_targets.py``): bulk
INSERTs on SQL, Redis pipelines for the event log, concurrent substore calls elsewhere.
moto, the local S3 stand-in, answers every LIST by sorting every key of the bucket, so
an S3 page over moto costs O(bucket) whatever the backend does; S3 is therefore loaded
to ``--s3-large`` rows and events at most (default 3,000) and its ratio measures moto as
much as the backend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.scaling_targets import (
    AGENT_PAGE,
    BACKENDS,
    BASE_MS,
    CWDS,
    EVENT_PAGE,
    RUN_AGENTS,
    RUN_PAGE,
    TENANT,
    Target,
    agent_id,
    events_run,
    run_position,
    target_for,
)
from bridge_store.backend.substores import AgentPosition, Backend

# -- timing ----------------------------------------------------------------------------

Query = Callable[[], Awaitable[Any]]


def queries(backend: Backend, rows: int, events: int) -> dict[str, tuple[Query, int | None]]:
    """The pages to time at this scale, by name, with the item count each must return."""
    agents, runs, log = backend.agents, backend.runs, backend.run_events
    assert agents is not None
    assert runs is not None
    assert log is not None
    mid = rows // 2
    agent_mid = AgentPosition(updated_at=BASE_MS + mid, agent_id=agent_id(mid))
    # A run of agent 0 half way through its runs (agent 0 has runs 0, 10, 20, ...).
    of_agent_mid = run_position((mid // RUN_AGENTS) * RUN_AGENTS)
    cwd = "/work/project-0"
    cwd_mid = (mid // CWDS) * CWDS  # an agent of project-0 half way down
    cwd_after = AgentPosition(updated_at=BASE_MS + cwd_mid, agent_id=agent_id(cwd_mid))
    run_id = events_run(events)
    agent_page, run_page, event_page = AGENT_PAGE + 1, RUN_PAGE + 1, EVENT_PAGE + 1
    return {
        "agents first": (
            lambda: agents.list(TENANT, cwd=None, after=None, limit=agent_page),
            min(agent_page, rows),
        ),
        "agents mid": (
            lambda: agents.list(TENANT, cwd=None, after=agent_mid, limit=agent_page),
            min(agent_page, mid),
        ),
        "agents cwd first": (
            lambda: agents.list(TENANT, cwd=cwd, after=None, limit=agent_page),
            min(agent_page, -(-rows // CWDS)),
        ),
        "agents cwd mid": (
            lambda: agents.list(TENANT, cwd=cwd, after=cwd_after, limit=agent_page),
            min(agent_page, cwd_mid // CWDS),
        ),
        "runs first": (
            lambda: runs.list(TENANT, agent_ids=None, run_ids=None, after=None, limit=run_page),
            min(run_page, rows),
        ),
        "runs mid": (
            lambda: runs.list(
                TENANT, agent_ids=None, run_ids=None, after=run_position(mid), limit=run_page
            ),
            min(run_page, rows - mid - 1),
        ),
        "runs agent first": (
            lambda: runs.list(
                TENANT, agent_ids=[agent_id(0)], run_ids=None, after=None, limit=run_page
            ),
            min(run_page, -(-rows // RUN_AGENTS)),
        ),
        "runs agent mid": (
            lambda: runs.list(
                TENANT, agent_ids=[agent_id(0)], run_ids=None, after=of_agent_mid, limit=run_page
            ),
            min(run_page, -(-rows // RUN_AGENTS) - mid // RUN_AGENTS - 1),
        ),
        "runs by id": (
            lambda: runs.list(
                TENANT, agent_ids=None, run_ids=[f"run-{mid:07d}"], after=None, limit=run_page
            ),
            1,
        ),
        "events first": (
            lambda: log.list(TENANT, run_id, after_seq=0, limit=event_page),
            min(event_page, events),
        ),
        "events mid": (
            lambda: log.list(TENANT, run_id, after_seq=events // 2, limit=event_page),
            min(event_page, events - events // 2),
        ),
        "events poll at end": (
            lambda: log.list(TENANT, run_id, after_seq=events, limit=event_page),
            0,
        ),
    }


async def time_queries(
    small: dict[str, tuple[Query, int | None]],
    large: dict[str, tuple[Query, int | None]],
    repeat: int,
) -> tuple[dict[str, float], dict[str, float]]:
    """Median milliseconds per call of each query on each store.

    Calls alternate between the two stores, so load from elsewhere on the machine
    lands on both alike.
    """
    medians: tuple[dict[str, float], dict[str, float]] = ({}, {})
    for name in small:
        pair = (small[name], large[name])
        for query, expected in pair:
            result = await query()
            if expected is not None and len(result) != expected:
                raise AssertionError(f"{name}: {len(result)} items, expected {expected}")
            await query()
        samples: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeat):
            for (query, _expected), times in zip(pair, samples, strict=True):
                started = time.perf_counter()
                await query()
                times.append((time.perf_counter() - started) * 1000)
        for times, into in zip(samples, medians, strict=True):
            into[name] = statistics.median(times)
    return medians


@dataclass
class Result:
    backend: str
    scales: list[tuple[int, int]] = field(default_factory=list)  # (rows, events)
    load_seconds: list[float] = field(default_factory=list)
    p50_ms: list[dict[str, float]] = field(default_factory=list)


async def measure(targets: list[Target], scales: list[tuple[int, int]], repeat: int) -> Result:
    """Fill one store per scale, then time the same pages on each, alternating."""
    result = Result(targets[0].name)
    backends: list[Backend] = []
    try:
        for target, (rows, events) in zip(targets, scales, strict=True):
            backend = await target.open()
            backends.append(backend)
            started = time.perf_counter()
            await target.load_rows(backend, 0, rows)
            await target.load_events(backend, events_run(events), events)
            result.load_seconds.append(time.perf_counter() - started)
            result.scales.append((rows, events))
            print(
                f"{target.name}: {rows:,} rows, {events:,} events loaded in "
                f"{result.load_seconds[-1]:.1f} s",
                file=sys.stderr,
            )
        (small_rows, small_events), (large_rows, large_events) = scales
        medians = await time_queries(
            queries(backends[0], small_rows, small_events),
            queries(backends[1], large_rows, large_events),
            repeat,
        )
        result.p50_ms.extend(medians)
    finally:
        for backend in backends:
            await backend.close()
    return result


def report(result: Result) -> None:
    (small_rows, small_events), (large_rows, large_events) = result.scales
    print(
        f"\n{result.backend}: p50 ms per page, {small_rows:,} rows / {small_events:,} events "
        f"vs {large_rows:,} rows / {large_events:,} events"
    )
    print(f"  {'page':20s} {'small':>8s} {'large':>8s} {'ratio':>6s}")
    small, large = result.p50_ms
    for name in small:
        ratio = large[name] / small[name]
        flag = "" if ratio <= 1.5 else "  <-- over 1.5x"
        print(f"  {name:20s} {small[name]:8.3f} {large[name]:8.3f} {ratio:6.2f}{flag}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench scaling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--small", type=int, default=1000, help="agents and runs, small")
    parser.add_argument("--large", type=int, default=100_000, help="agents and runs, large")
    parser.add_argument("--events", type=int, default=1_000_000, help="events of one run, large")
    parser.add_argument(
        "--s3-large", type=int, default=3000, help="cap on S3's large rows and events (moto)"
    )
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per page")
    parser.add_argument("--json", action="store_true", help="also print results as JSON")
    args = parser.parse_args(argv)

    results: list[Result] = []
    for name in args.backends.split(","):
        with target_for(name, args.s3_large) as target, target_for(name, args.s3_large) as small:
            large, events = args.large, args.events
            if target.cap is not None and (large > target.cap or events > target.cap):
                large, events = min(large, target.cap), min(events, target.cap)
                print(
                    f"{name}: loaded to {large:,} rows and {events:,} events only "
                    "(moto lists by sorting the whole bucket; see --s3-large)",
                    file=sys.stderr,
                )
            scales = [(args.small, args.small), (large, events)]
            result = asyncio.run(measure([small, target], scales, args.repeat))
        results.append(result)
        report(result)
    if args.json:
        print(json.dumps([result.__dict__ for result in results]))
    return 0
