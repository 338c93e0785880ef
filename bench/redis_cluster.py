"""Redis Cluster: appends in process, standalone against cluster, with and without WAIT.

    python -m bench redis-cluster [--appends 20000]

Starts, in a temporary directory on free loopback ports (nothing saved, the machine's
Redis untouched), a standalone ``redis-server`` and a cluster of 3 primaries with a
replica each (``redis-cli --cluster create --cluster-replicas 1``). On each of
``redis://`` (standalone), ``redis+cluster://`` and ``redis+cluster://...&wait_replicas=1``
it measures, through the backend without HTTP:

- append latency, one at a time on one run (p50, p99);
- appends per second with 64 in flight over 64 runs (spread over the shards);

and reports how many of the cluster's run logs each primary holds. One Python process
drives it all, so the figures are the client's cost per append as much as Redis's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from bench.redis_events import concurrent, event, summary, timed
from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store_redis.backend import RedisBackend
from testkit.services import free_port

NODES = 6
START_SECONDS = 30.0
IN_FLIGHT = 64


def start_server(directory: Path, *, cluster: bool) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    directory.mkdir()
    options = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    options += ["--dir", str(directory)]
    if cluster:
        options += ["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"]
        options += ["--cluster-port", str(free_port())]
    executable = shutil.which("redis-server")
    if executable is None:
        raise SystemExit("redis-server is not installed")
    process = subprocess.Popen(
        [executable, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + START_SECONDS
    with redis.Redis(port=port) as client:
        while True:
            try:
                client.ping()
                return process, port
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"redis-server did not start on port {port}") from None
                time.sleep(0.05)


@contextlib.contextmanager
def servers() -> Iterator[tuple[int, list[int]]]:
    """A standalone server's port and the cluster's node ports, stopped on exit."""
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="bench-redis-cluster-") as root:
        try:
            process, standalone = start_server(Path(root) / "standalone", cluster=False)
            processes.append(process)
            ports = []
            for n in range(NODES):
                process, port = start_server(Path(root) / f"node-{n}", cluster=True)
                processes.append(process)
                ports.append(port)
            addresses = [f"127.0.0.1:{port}" for port in ports]
            subprocess.run(
                [
                    "redis-cli",
                    "--cluster",
                    "create",
                    *addresses,
                    "--cluster-replicas",
                    "1",
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=START_SECONDS,
            )
            wait_for_cluster(ports)
            yield standalone, ports
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=START_SECONDS)


def wait_for_cluster(ports: list[int]) -> None:
    """Until every node says cluster_state:ok and each primary's replica is in sync
    (before that, a ``wait_replicas`` write has no replica to wait for)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        ready = 0
        for port in ports:
            with redis.Redis(port=port) as client:
                ok = client.cluster("INFO")["cluster_state"] == "ok"
                info = client.info("replication")
            synced = info["role"] != "master" or info.get("slave0", {}).get("state") == "online"
            ready += ok and synced
        if ready == len(ports):
            return
        time.sleep(0.1)
    raise SystemExit("the cluster did not reach cluster_state:ok with its replicas in sync")


def logs_per_primary(ports: list[int], prefix: str) -> list[int]:
    counts = []
    for port in ports:
        with redis.Redis(port=port) as client:
            if client.info("replication")["role"] == "master":
                pattern = f"{{{prefix}:runEvents#*}}:log"
                counts.append(sum(1 for _ in client.scan_iter(match=pattern, count=1000)))
    return sorted(counts)


async def measure(url: str, appends: int) -> None:
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, RedisBackend)
    await backend.start(migrate=True)
    try:
        store = backend.run_events
        latencies = await timed(appends // 10, lambda _: store.append("default", event("one")))
        rate = await concurrent(
            appends, IN_FLIGHT, lambda n: store.append("default", event(f"run-{n % IN_FLIGHT}"))
        )
        print(f"  append one at a time: {summary(latencies)}")
        print(f"  append, {IN_FLIGHT} in flight over {IN_FLIGHT} runs: {rate:,.0f}/s")
    finally:
        await backend.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench redis-cluster", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--appends", type=int, default=20_000)
    args = parser.parse_args(argv)
    with servers() as (standalone, ports):
        seeds = ",".join(f"127.0.0.1:{port}" for port in ports[:3])
        targets = [
            ("standalone", f"redis://127.0.0.1:{standalone}/0?prefix=bench"),
            ("cluster", f"redis+cluster://{seeds}/?prefix=bench"),
            (
                "cluster, wait_replicas=1",
                f"redis+cluster://{seeds}/?prefix=bench-wait&wait_replicas=1",
            ),
        ]
        for name, url in targets:
            print(f"{name}:")
            asyncio.run(measure(url, args.appends))
        counts = logs_per_primary(ports, "bench")
        print(f"cluster: logs of its {IN_FLIGHT + 1} runs per primary: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
