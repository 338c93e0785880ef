"""CPU time per CallStore request in each implementation's ASGI app, without a network.

Drives the apps of ``bench/connect_overhead.py`` directly through the ASGI interface
(lifespan included, memory backend) and divides the process CPU time by the number of
requests. Process CPU time, unlike wall-clock throughput, barely moves when other
processes load the machine, so this isolates the protocol layer's own cost; it leaves
out uvicorn's HTTP parsing, which is the same for every implementation.

    python bench/connect_asgi_cpu.py --requests 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.connect_connectrpc_app import create_connectrpc_app
from bench.connect_overhead import (
    AGENT,
    IMPLEMENTATIONS,
    SCENARIOS,
    TOKEN,
    scenario_request,
)
from bridge_store.app import create_app
from bridge_store.config import ServerConfig
from bridge_store.connect import CALL_STORE_PATH
from bridge_store.stores import Routes

CLEAR_EVENTS = json.dumps(
    {"substore": "runEvents", "method": "delete", "input": {"filter": {}}}
).encode()
App = Callable[[Any, Any, Any], Coroutine[Any, Any, None]]


def build(impl: str) -> App:
    config = ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN)
    if impl == "ours":
        return create_app(config)
    return create_connectrpc_app(config, our_codecs=impl.endswith("our-codecs"))


class Lifespan:
    """Drives an app's ASGI lifespan: startup on enter, shutdown on exit."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._task = asyncio.create_task(self._app(scope, self._inbox.get, self._outbox.put))
        await self._inbox.put({"type": "lifespan.startup"})
        message = await self._outbox.get()
        assert message["type"] == "lifespan.startup.complete", message

    async def __aexit__(self, *exc_info: object) -> None:
        await self._inbox.put({"type": "lifespan.shutdown"})
        message = await self._outbox.get()
        assert message["type"] == "lifespan.shutdown.complete", message
        assert self._task is not None
        await self._task


async def request(app: App, content_type: str, body: bytes) -> None:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": CALL_STORE_PATH,
        "raw_path": CALL_STORE_PATH.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", content_type.encode()),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"connect-protocol-version", b"1"),
            (b"accept-encoding", b"gzip, br"),  # what the bridge (connect-node) sends
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8787),
        "state": {},
    }
    delivered = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while the request runs
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    assert status == [200], status


async def cpu_per_request(app: App, scenario: str, requests: int) -> float:
    content_type, body = scenario_request(scenario)
    start = time.process_time()
    for _ in range(requests):
        await request(app, content_type, body)
    spent = time.process_time() - start
    # Untimed: drop the appended events so the heap, and with it the garbage
    # collector's work, stays the same size from round to round.
    await request(app, "application/json", CLEAR_EVENTS)
    return spent / requests * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", nargs="+", choices=IMPLEMENTATIONS, default=IMPLEMENTATIONS)
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=SCENARIOS)
    parser.add_argument("--requests", type=int, default=5000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (median shown)")
    args = parser.parse_args()

    apps = {impl: build(impl) for impl in args.impl}
    async with contextlib.AsyncExitStack() as stack:
        for app in apps.values():
            await stack.enter_async_context(Lifespan(app))
            create = {"substore": "agents", "method": "create", "input": {"agent": AGENT}}
            await request(app, "application/json", json.dumps(create).encode())
        print("| implementation | scenario | CPU µs/request (median) | min | max |")
        print("|---|---|---|---|---|")
        for scenario in args.scenario:
            await measure(apps, scenario, args.requests, args.rounds)


async def measure(apps: dict[str, App], scenario: str, requests: int, rounds: int) -> None:
    samples: dict[str, list[float]] = {impl: [] for impl in apps}
    for app in apps.values():  # warm caches and the memory backend's structures
        await cpu_per_request(app, scenario, 200)
    # Rounds alternate between implementations so that drift hits all of them alike.
    for _ in range(rounds):
        for impl, app in apps.items():
            samples[impl].append(await cpu_per_request(app, scenario, requests))
    for impl, values in samples.items():
        print(
            f"| {impl} | {scenario} | {statistics.median(values):.0f} "
            f"| {min(values):.0f} | {max(values):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
