"""How fast a Redis outage becomes `unavailable`, and how fast calls work again.

Starts its own redis-server on a free port (the machine's Redis is never stopped):

    python bench/redis_faults.py [--rounds 20]

1. nothing listens on the port (connection refused);
2. the port accepts connections and never answers (a hung or blackholed Redis), with
   the default timeouts and with ``socket_connect_timeout=0.5&socket_timeout=0.5``;
3. the server is stopped mid-service (calls fail), then started again on the same port:
   the time from its restart until the first call that succeeds, with the same backend
   (no restart of the store).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge_store.errors import ConnectError
from bridge_store.plugins import get_plugin_manager, open_backend
from bridge_store_redis.backend import RedisBackend


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def backend_for(url: str) -> RedisBackend:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, RedisBackend)
    return backend


async def time_to_error(url: str, rounds: int) -> str:
    backend = backend_for(url)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        try:
            await backend.agents.get("a")
        except ConnectError as error:
            seconds.append(time.perf_counter() - start)
            code = error.code.value
        else:
            raise AssertionError("the call succeeded")
    await backend.close()
    median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
    return f"{code} after median {median:.1f} ms, max {worst:.1f} ms"


def start_redis(port: int, directory: str) -> subprocess.Popen[bytes]:
    executable = shutil.which("redis-server")
    assert executable is not None, "redis-server is not installed"
    return subprocess.Popen(
        [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory],
        stdout=subprocess.DEVNULL,
    )


async def recovery(rounds: int) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = start_redis(port, directory)
        backend = backend_for(f"redis://127.0.0.1:{port}/0")
        while True:
            try:
                await backend.start(migrate=True)
                break
            except ConnectError:
                await asyncio.sleep(0.01)
        recoveries = []
        for _ in range(rounds):
            server.terminate()
            server.wait()
            try:
                await backend.agents.get("a")
                raise AssertionError("a call succeeded with Redis stopped")
            except ConnectError:
                pass
            server = start_redis(port, directory)
            restarted = time.perf_counter()
            while True:
                try:
                    await backend.run_events.append(
                        {"runId": "r", "eventType": "t", "payload": None, "payloadRef": None,
                         "idempotencyKey": None, "createdAt": 0}
                    )  # fmt: skip
                    break
                except ConnectError:
                    await asyncio.sleep(0.005)
            recoveries.append(time.perf_counter() - restarted)
        server.terminate()
        server.wait()
        await backend.close()
    print(
        f"Redis restarted: first successful append after median "
        f"{statistics.median(recoveries) * 1000:.0f} ms, max {max(recoveries) * 1000:.0f} ms "
        "(includes redis-server's own start-up; calls before that fail with unavailable)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    refused = await time_to_error(f"redis://127.0.0.1:{free_port()}/0", args.rounds)
    print(f"nothing listening: {refused}")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        port = listener.getsockname()[1]
        hung = await time_to_error(f"redis://127.0.0.1:{port}/0", min(args.rounds, 3))
        print(f"hung Redis, default timeouts: {hung}")
        short = "socket_connect_timeout=0.5&socket_timeout=0.5"
        hung = await time_to_error(f"redis://127.0.0.1:{port}/0?{short}", min(args.rounds, 5))
        print(f"hung Redis, {short}: {hung}")
    await recovery(args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
