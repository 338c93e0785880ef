"""Many ``serve`` processes on one backend: ops/s, and whose CPU each op costs.

    python -m bench scale-out [--backends postgres,redis] [--servers 1,2,4]
                              [--connections 16] [--duration 10] [--warmup 3]

For each backend and each server count N: one store (a fresh Postgres database, a
fresh Redis key prefix, as ``bench load``), N ``bridge-store serve`` processes on it,
seeded once, then N wrk processes at once, each with ``connections / N`` connections
to its own server and its own share of the active runs, for ``--warmup`` then
``--duration`` seconds of the realistic mix (``bench/loadgen.py``). Afterwards every
active run's log is audited as in ``bench load``.

Besides ops/s and latency, it reads the CPU time of every process in the path during
the timed run: the servers, wrk, and the backend's own processes (the Postgres
backends serving this database and the WAL writer; the Redis server). Divided by the
ops served, that gives CPU ms per op on each side, the figures docs/benchmarks.md's
model of scaling out is made from: ops/s per server core, ops/s per backend core, and
the server count at which the backend's cores run out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import secrets
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bridge_store.client import Sidecar, start_serve
from testkit.callstore import CallStoreClient
from testkit.services import fetch

from . import mix, servers
from .load_checks import audit, preflight, seed
from .loadgen import LoadResult, lua_script, run_wrk, wrk_path
from .machine import cpu_seconds, machine

BACKENDS = ("postgres", "redis")


@dataclass
class Step:
    """One backend at one server count."""

    backend: str
    servers: int
    results: list[LoadResult] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    load_average: tuple[float, ...] = ()

    @property
    def requests(self) -> int:
        return sum(result.requests for result in self.results)

    @property
    def ops_per_second(self) -> float:
        return sum(result.ops_per_second for result in self.results)

    def cpu_ms_per_op(self, side: str) -> float | None:
        if side not in self.cpu_s or not self.requests:
            return None
        return self.cpu_s[side] * 1000 / self.requests

    def as_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "servers": self.servers,
            "ops_per_s": round(self.ops_per_second, 1),
            "per_server": [result.as_json() for result in self.results],
            "cpu_s": {side: round(value, 2) for side, value in self.cpu_s.items()},
            "cpu_ms_per_op": {side: self.cpu_ms_per_op(side) for side in self.cpu_s},
            "problems": self.problems,
            "load_average": self.load_average,
        }


# -- the backend's processes -----------------------------------------------------------


def backend_pids(backend: str, store_url: str) -> list[int]:
    """The processes doing this store's backend work, once the servers are connected."""
    if backend == "postgres":
        database = urlsplit(store_url).path.lstrip("/")
        rows = fetch(
            store_url,
            "SELECT pid FROM pg_stat_activity WHERE (datname = $1 AND pid <> pg_backend_pid()) "
            "OR backend_type = 'walwriter'",
            database,
        )
        return [int(row["pid"]) for row in rows]
    import redis

    parts = urlsplit(store_url)
    client = redis.Redis(host=parts.hostname or "127.0.0.1", port=parts.port or 6379)
    try:
        info = client.info("server")
    finally:
        client.close()
    return [int(info["process_id"])]


def process_cpu(pids: Sequence[int]) -> float:
    """CPU seconds the processes have used so far; processes gone count as 0."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += cpu_seconds(pid)
    return total


def children_cpu() -> float:
    """CPU seconds of this process's children that have been waited for (wrk runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- one step ----------------------------------------------------------------------------


@contextlib.contextmanager
def serving(store_url: str, count: int, token: str) -> Iterator[list[Sidecar]]:
    started: list[Sidecar] = []
    try:
        for _ in range(count):
            args = ["--host", "127.0.0.1", "--port", "0", "--store", store_url]
            started.append(start_serve([*args, "--log-level", "warning"], auth_token=token))
        yield started
    finally:
        for sidecar in started:
            sidecar.close()


def _wrk_all(
    sidecars: list[Sidecar],
    ops: Sequence[mix.Operation],
    world: mix.World,
    phase: str,
    duration: int,
    connections: int,
    directory: Path,
) -> list[LoadResult]:
    """One wrk per server, all at once, each with its share of connections and runs."""
    count = len(sidecars)
    results: list[LoadResult | BaseException | None] = [None] * count
    active = world.active[phase]

    def one(index: int) -> None:
        pools = {"agents": world.agents, "blobs": world.blobs, "active": active[index::count]}
        script = directory / f"{phase}-{index}.lua"
        tag = f"{mix.PHASES.index(phase):06x}{index:02x}"
        text = lua_script(
            ops, mix.schedule(ops), pools, token=sidecars[index].auth_token, tag=tag, threads=1
        )
        script.write_text(text, encoding="utf-8")
        script.chmod(0o600)  # it holds the token
        try:
            results[index] = run_wrk(
                sidecars[index].url,
                script,
                connections=connections // count,
                threads=1,
                duration=duration,
            )
        except BaseException as error:  # reported by the caller, with the others' results
            results[index] = error

    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [result for result in results if not isinstance(result, LoadResult)]
    if failed:
        raise RuntimeError(f"wrk failed: {failed[0]}")
    return [result for result in results if isinstance(result, LoadResult)]


def _merged(results: list[LoadResult]) -> LoadResult:
    """The servers' results as one, for the audit (latency is not merged)."""
    appended: dict[str, int] = {}
    for result in results:
        for run, count in result.appended.items():
            appended[run] = appended.get(run, 0) + count
    errors = {kind: sum(r.errors.get(kind, 0) for r in results) for kind in results[0].errors}
    return LoadResult(
        requests=sum(r.requests for r in results),
        duration_s=max(r.duration_s for r in results),
        errors=errors,
        latency_ms={},
        appended=appended,
    )


def measure(backend: str, count: int, args: argparse.Namespace) -> Step:
    step = Step(backend, count)
    ops = mix.operations("realistic")
    world = mix.build_world(active_runs=args.connections)
    token = secrets.token_urlsafe(24)
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-out-") as directory,
        servers.store_url(backend, Path(directory)) as store_url,
        serving(store_url, count, token) as sidecars,
    ):
        client = CallStoreClient(sidecars[0].url, token)
        try:
            seed(client, world)
            step.problems += preflight(client, ops, world, is_store=True)
            # The others serve the same store: each must see what the first one wrote.
            agent_id = world.agents[0]["AGENT"]
            for sidecar in sidecars[1:]:
                other = CallStoreClient(sidecar.url, token)
                try:
                    found = other.call("agents", "get", {"agentId": agent_id})
                finally:
                    other.close()
                if (found or {}).get("agentId") != agent_id:
                    step.problems.append(f"{sidecar.url} does not see the seeded agents")
            if step.problems:
                return step
            phases = {}
            if args.warmup:
                warm = _wrk_all(
                    sidecars, ops, world, "warmup", args.warmup, args.connections, Path(directory)
                )
                phases["warmup"] = _merged(warm)
            pids = backend_pids(backend, store_url)
            server_pids = [sidecar.process.pid for sidecar in sidecars]
            before = (process_cpu(server_pids), process_cpu(pids), children_cpu())
            step.results = _wrk_all(
                sidecars, ops, world, "timed", args.duration, args.connections, Path(directory)
            )
            after = (process_cpu(server_pids), process_cpu(pids), children_cpu())
            step.cpu_s = {
                side: after[n] - before[n] for n, side in enumerate(("servers", "backend", "wrk"))
            }
            step.load_average = os.getloadavg()
            phases["timed"] = merged = _merged(step.results)
            if merged.error_count:
                step.problems.append(f"timed run: {merged.errors} errors")
            step.problems += audit(client, world, ops, phases, args.connections)
        finally:
            client.close()
    return step


# -- the command -------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(steps: list[Step], duration: int) -> str:
    lines = [
        "| backend | servers | ops/s | p99 ms (worst server) | server CPU ms/op "
        "| backend CPU ms/op | wrk CPU ms/op | server cores busy | backend cores busy |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for step in steps:
        if step.problems or not step.results:
            lines.append(f"| {step.backend} | {step.servers} | FAIL: {step.problems[:1]} |")
            continue

        worst = max(result.latency_ms["p99"] for result in step.results)
        cells = [
            step.backend,
            str(step.servers),
            f"{step.ops_per_second:,.0f}",
            f"{worst:.2f}",
            *(_ms(step.cpu_ms_per_op(side)) for side in ("servers", "backend", "wrk")),
            f"{step.cpu_s['servers'] / duration:.2f}",
            f"{step.cpu_s['backend'] / duration:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench scale-out", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--servers", default="1,2,4", help="server counts (default: 1,2,4)")
    parser.add_argument("--connections", type=int, default=16, help="in all (default: 16)")
    parser.add_argument("--duration", type=int, default=10, help="seconds (default: 10)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds (default: 3)")
    parser.add_argument("--json", type=Path, help="where to write the results")
    args = parser.parse_args(argv)
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    counts = [int(n) for n in args.servers.split(",")]
    if set(backends) - set(BACKENDS) or any(n < 1 or args.connections % n for n in counts):
        parser.error(f"backends from {BACKENDS}; each server count must divide --connections")
    try:
        wrk_path()
    except FileNotFoundError as error:
        print(f"python -m bench scale-out: {error}", file=sys.stderr)
        return 2
    info = machine() | {"load_average_before": os.getloadavg()}
    steps = []
    for backend in backends:
        for count in counts:
            print(f"bench scale-out: {backend} x {count} ...", file=sys.stderr, flush=True)
            steps.append(measure(backend, count, args))
    info["load_average_after"] = os.getloadavg()
    print(
        f"\nrealistic mix, {args.connections} connections in all, {args.duration} s after "
        f"{args.warmup} s warm-up; {info['nproc']} CPUs, load average "
        f"{info['load_average_before'][0]:.2f} before, {info['load_average_after'][0]:.2f} "
        "after\n"
    )
    print(table(steps, args.duration))
    results = {"machine": info, "steps": [step.as_json() for step in steps]}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 1 if any(step.problems for step in steps) else 0
