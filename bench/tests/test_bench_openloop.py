"""bench/openloop.py: the requests it sends, and latency counted from when each was due."""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Any

import pytest

from bench import mix
from bench.openloop import RequestSource, percentiles, run_open_loop
from testkit.inprocess import running

TOKEN = "open-loop-test-token"


def _source(mix_name: str = "realistic") -> RequestSource:
    ops = mix.operations(mix_name)
    world = mix.build_world(active_runs=2)
    pools = {"agents": world.agents, "blobs": world.blobs, "active": world.active["open"]}
    return RequestSource(ops, mix.schedule(ops), pools, tag="00000003")


def test_percentiles_are_ranks_of_the_samples_in_ms() -> None:
    samples = [i / 1000 for i in range(1, 1001)]  # 1 ms .. 1000 ms
    result = percentiles(samples)
    assert (result["min"], result["p50"], result["p99"], result["p99.9"]) == (1, 500, 990, 999)
    assert (result["max"], result["mean"]) == (1000, 500.5)
    assert percentiles([]) == {}


def test_requests_follow_the_schedule_and_fill_holes_like_the_wrk_script() -> None:
    source = _source()
    bodies = [json.loads(source.next()[1]) for _ in range(200)]
    ops = mix.operations()
    # Two passes over the 100-long cycle: each operation exactly twice its weight.
    expected: dict[str, int] = {}
    for op in ops:
        expected[op.name] = expected.get(op.name, 0) + 2 * op.weight
    assert dict(source.sent) == expected
    appends = [body for body in bodies if body["method"] == "append"]
    assert sum(source.appended.values()) == len(appends) == 100
    # Polls start POLL_BEHIND events behind what was appended to their run so far.
    world = mix.build_world(active_runs=2)
    seeded = {record["RUN"]: int(record["SEEDED"]) for record in world.active["open"]}
    appended = dict.fromkeys(seeded, 0)
    for body in bodies:
        data = body["input"]
        if body["method"] == "append":
            appended[data["runId"]] += 1
        elif body["substore"] == "runEvents" and body["method"] == "list":
            run = data["runId"]
            assert data["afterOffset"] == str(max(0, seeded[run] + appended[run] - mix.POLL_BEHIND))
    # Fresh blob ids carry the phase tag and the request counter.
    created = [b["input"]["blobId"] for b in bodies if b["method"] == "create"]
    assert created
    assert all(blob_id.startswith("00000003" + "00") for blob_id in created)
    assert len(set(created)) == len(created)


def _stalling_app(stall_seconds: float, clients: list[Any] | None = None) -> Any:
    """Answers every request at once, except the first, which it holds ``stall_seconds``;
    notes each request's client address in ``clients``."""
    answered = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal answered
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        if clients is not None:
            clients.append(tuple(scope["client"]))
        answered += 1
        if answered == 1:
            await asyncio.sleep(stall_seconds)
        authorized = (b"authorization", f"Bearer {TOKEN}".encode()) in scope["headers"]
        status = 200 if authorized else 401
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def test_a_stall_counts_for_every_request_that_came_due_during_it() -> None:
    stall, rate, duration = 0.3, 100.0, 0.5
    with running(_stalling_app(stall)) as url:
        result = run_open_loop(
            url + "/", TOKEN, _source("agents.get"), rate=rate, connections=1, duration=duration
        )
    assert result.load.requests == 50
    assert result.load.error_count == 0
    assert result.load.sent == {"agents.get": 50}
    # Request i was due at i / rate and could not be answered before the stall ended,
    # since one connection carries one request at a time: whatever this machine's
    # speed, its latency is at least stall - i / rate. A closed-loop client would have
    # timed only the first one's wait.
    latencies = sorted((latency for latency, _ in result.samples), reverse=True)
    for i in range(int(stall * rate)):
        assert latencies[i] >= stall - (i + 1) / rate
    # And never less than the time its answer took once sent.
    assert all(latency >= service for latency, service in result.samples)


def test_every_connection_carries_requests_in_turn() -> None:
    # Each connection is used in turn, as wrk uses them: one left idle would meet the
    # server's first-request deadline (10 s in serve) and fail the request it crossed.
    clients: list[Any] = []
    with running(_stalling_app(0.0, clients)) as url:
        result = run_open_loop(
            url + "/", TOKEN, _source("agents.get"), rate=100, connections=4, duration=0.2
        )
    assert result.load.error_count == 0
    assert len(clients) == 20
    assert sorted(collections.Counter(clients).values()) == [5, 5, 5, 5]


def test_errors_are_counted_never_as_answers() -> None:
    with running(_stalling_app(0.0)) as url:
        result = run_open_loop(
            url + "/", "wrong-token", _source("agents.get"), rate=50, connections=2, duration=0.2
        )
    assert result.load.errors["status"] == result.load.requests == 10


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="rate"):
        run_open_loop("http://127.0.0.1:1/", TOKEN, _source(), rate=0, connections=1, duration=1)
