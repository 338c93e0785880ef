"""Two ``bridge-store serve`` processes on one Redis, hammered at once, agree on everything."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.support.redis import MakeRedisUrl
from tests.support.server import CALL_STORE_PATH, ServerProcess, serve

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RUNS = ("run-a", "run-b", "run-c")
APPENDS_PER_RUN_PER_SERVER = 100
KEYED_RACERS = 20
#: Calls in flight per server at any time. The machine has 2 cores; more in flight
#: only queues longer in the HTTP layers without adding contention in Redis.
IN_FLIGHT = 16


async def hammer(servers: list[ServerProcess]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=IN_FLIGHT * len(servers))
    gates = {server.url: asyncio.Semaphore(IN_FLIGHT) for server in servers}

    async def call(
        http: httpx.AsyncClient, server: ServerProcess, substore: str, method: str, data: Any
    ) -> httpx.Response:
        async with gates[server.url]:
            return await http.post(
                server.url + CALL_STORE_PATH,
                json={"substore": substore, "method": method, "input": data},
                headers={
                    "Authorization": f"Bearer {server.token}",
                    "Connect-Protocol-Version": "1",
                },
            )

    async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
        calls = [
            call(
                http,
                server,
                "runEvents",
                "append",
                {"runId": run_id, "eventType": "t", "payload": {"server": number, "n": n}},
            )
            for n in range(APPENDS_PER_RUN_PER_SERVER)
            for run_id in RUNS
            for number, server in enumerate(servers)
        ]
        # Racing appends of one idempotency key, and racing creates of one agent.
        calls += [
            call(
                http,
                servers[n % 2],
                "runEvents",
                "append",
                {"runId": "run-a", "eventType": "keyed", "idempotencyKey": "once", "payload": n},
            )
            for n in range(KEYED_RACERS)
        ]
        calls += [
            call(
                http,
                servers[n % 2],
                "agents",
                "create",
                {
                    "agent": {
                        "agentId": "contested",
                        "cwd": "/w",
                        "updatedAt": n,
                        "name": f"creator {n}",
                    }
                },
            )
            for n in range(KEYED_RACERS)
        ]
        return list(await asyncio.gather(*calls))


def test_two_servers_give_gapless_seqs_and_lose_nothing(make_redis_url: MakeRedisUrl) -> None:
    url = make_redis_url()
    with serve("--store", url) as first, serve("--store", url) as second:
        responses = asyncio.run(hammer([first, second]))
        bodies = [response.json() for response in responses]
        failures = [
            body
            for response, body in zip(responses, bodies, strict=True)
            if response.status_code != 200
        ]
        creates = bodies[-KEYED_RACERS:]
        # Exactly one create of the contested agent wins; the rest are already_exists.
        assert sum("output" in body for body in creates) == 1
        assert [body["code"] for body in failures] == ["already_exists"] * (KEYED_RACERS - 1)

        keyed = [body["output"] for body in bodies[-2 * KEYED_RACERS : -KEYED_RACERS]]
        assert all(event == keyed[0] for event in keyed)

        appended = APPENDS_PER_RUN_PER_SERVER * 2
        for run_id in RUNS:
            # Both servers read the same log.
            log = first.events(run_id)
            assert log == second.events(run_id)
            extra = 1 if run_id == "run-a" else 0
            assert [event["seq"] for event in log] == list(range(1, appended + extra + 1))
            assert [event["offset"] for event in log] == [str(e["seq"]) for e in log]
            payloads = sorted(
                (event["payload"]["server"], event["payload"]["n"])
                for event in log
                if event["eventType"] == "t"
            )
            assert payloads == sorted(
                (number, n) for number in (0, 1) for n in range(APPENDS_PER_RUN_PER_SERVER)
            )
        # What each append returned is what the log holds at that seq.
        logs = {run_id: {e["seq"]: e for e in first.events(run_id)} for run_id in RUNS}
        for body in bodies[: -2 * KEYED_RACERS]:
            event = body["output"]
            assert logs[event["runId"]][event["seq"]] == event
        winner = first.call("agents", "get", {"agentId": "contested"})
        assert winner == second.call("agents", "get", {"agentId": "contested"})
        assert [body["output"] for body in creates if "output" in body] == [winner]
