"""Ops/s and latency of bridge-store on each backend, the reference server and the ceiling.

``python -m bench load`` runs, one at a time on this machine, each target as a fresh
server process (see ``bench/servers.py``) and, for each: seeds it (agents, runs,
events, blobs: ``bench.mix.build_world``), sends every operation of the mix once from
Python and checks each answer (pre-flight), runs wrk for ``--warmup`` then
``--duration`` seconds (``bench/loadgen.py``), and audits the run logs it appended to
(gapless ``seq``, as many events as appends answered). Any failed check, socket error,
timeout or non-2xx answer marks the target's row FAIL: errors are never counted as
throughput.

Prints a table (ops/s, p50/p99 latency, errors, ratios to the reference and the
ceiling, the targets bridge-store must meet) and writes the results, with the machine
they were taken on, as JSON. Exit status 0 when every row is clean and every target
met, 1 otherwise, 2 on bad usage or without wrk. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from bridge_store.connect import CALL_STORE_PATH

from . import mix, servers
from .loadgen import LoadResult, lua_script, run_wrk, wrk_path, wrk_version

RESULTS = Path(__file__).parent / "results"
#: Per target: (measure, comparison, threshold). Measures: "vs_reference" and
#: "vs_ceiling" (ops/s ratios, at least), "p99_ms" (below, at 16 connections).
GOALS: dict[str, list[tuple[str, float]]] = {
    "memory": [("vs_reference", 5.0), ("vs_ceiling", 0.6)],
    "sqlite": [("vs_reference", 2.0)],
    "postgres": [("vs_reference", 2.0), ("p99_ms", 10.0)],
    "redis": [("vs_reference", 2.0), ("p99_ms", 10.0)],
}
P99_GOAL_CONNECTIONS = 16


class CallStoreClient:
    """Plain JSON CallStore calls over one keep-alive connection."""

    def __init__(self, base_url: str, token: str) -> None:
        self._url = base_url.rstrip("/") + CALL_STORE_PATH
        self._http = httpx.Client(
            timeout=60.0,
            headers={
                "Authorization": f"Bearer {token}",
                "Connect-Protocol-Version": "1",
                "Content-Type": "application/json",
            },
        )

    def send(self, body: str) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body) of one request body."""
        response = self._http.post(self._url, content=body.encode())
        return response.status_code, response.json()

    def call(self, substore: str, method: str, data: Any) -> Any:
        """The output of a call that must succeed."""
        body = json.dumps({"substore": substore, "method": method, "input": data})
        status, answer = self.send(body)
        if status != 200:
            raise RuntimeError(f"{substore}.{method} answered {status}: {answer}")
        return answer.get("output")

    def close(self) -> None:
        self._http.close()


@dataclass
class Row:
    """One target's measurements and verdicts."""

    target: str
    timed: LoadResult | None = None
    warmup: LoadResult | None = None
    problems: list[str] = field(default_factory=list)
    ratios: dict[str, float | None] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.problems and self.timed is not None

    @property
    def ops_per_second(self) -> float | None:
        return self.timed.ops_per_second if self.clean and self.timed else None

    @property
    def cpu_ms_per_op(self) -> float | None:
        """Server CPU per request: steadier than ops/s on a busy machine."""
        cpu = self.details.get("server_cpu_s")
        if cpu is None or not self.timed or not self.timed.requests:
            return None
        return float(cpu) * 1000 / self.timed.requests

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "clean": self.clean,
            "problems": self.problems,
            "timed": self.timed.as_json() if self.timed else None,
            "warmup": self.warmup.as_json() if self.warmup else None,
            "ratios": self.ratios,
            "server_cpu_ms_per_op": self.cpu_ms_per_op,
            "goals": self.goals,
            **self.details,
        }


# -- one target --------------------------------------------------------------------


def seed(client: CallStoreClient, world: mix.World) -> None:
    for substore, method, data in world.calls:
        client.call(substore, method, data)


def preflight(
    client: CallStoreClient, ops: Sequence[mix.Operation], world: mix.World, is_store: bool
) -> list[str]:
    """Send each operation once; what was wrong with the answers."""
    problems = []
    for counter, op in enumerate(ops, start=1):
        record = world.pool(op.pool, "preflight")[0]
        tag = _tag("preflight")
        status, answer = client.send(json.dumps(mix.render(op, record, counter, tag)))
        if status != 200 or not isinstance(answer, dict):
            problems.append(f"pre-flight {op.key}: HTTP {status} {answer!r:.300}")
            continue
        if is_store:
            problem = mix.check_output(op, record, world, answer.get("output"))
            if problem:
                problems.append(f"pre-flight {op.key}: {problem}")
    return problems


def audit(
    client: CallStoreClient,
    world: mix.World,
    ops: Sequence[mix.Operation],
    phases: dict[str, LoadResult],
    connections: int,
) -> list[str]:
    """Check every active run's log: gapless, and as long as the appends answered."""
    problems = []
    preflight_appends = sum(1 for op in ops if op.appends)
    for phase, records in world.active.items():
        result = phases.get(phase)
        if phase != "preflight" and result is None:
            continue
        missing = 0
        for record in records:
            seqs = _sequence(client, record["RUN"])
            if seqs != list(range(1, len(seqs) + 1)):
                problems.append(f"{phase} run {record['RUN']}: seq not gapless")
            sent = preflight_appends if result is None else result.appended.get(record["RUN"], 0)
            stored = len(seqs) - int(record["SEEDED"])
            if stored > sent:
                problems.append(f"{phase} run {record['RUN']}: {stored} events for {sent} appends")
            missing += sent - stored
        # wrk stops with up to one request in flight per connection.
        bound = 0 if result is None else connections
        if missing > bound:
            problems.append(f"{phase}: {missing} appends sent but not stored")
    return problems


def _sequence(client: CallStoreClient, run_id: str) -> list[int]:
    seqs: list[int] = []
    offset = "0"
    while True:
        page = client.call("runEvents", "list", {"runId": run_id, "afterOffset": offset})
        seqs += [event["seq"] for event in page["items"]]
        if "nextOffset" not in page:
            return seqs
        offset = page["nextOffset"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process (all its threads) has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tag(phase: str) -> str:
    return f"{mix.PHASES.index(phase):08x}"


def _phase(
    server: servers.Server,
    ops: Sequence[mix.Operation],
    world: mix.World,
    phase: str,
    duration: int,
    args: argparse.Namespace,
    directory: Path,
) -> LoadResult:
    pools = {
        "agents": world.agents,
        "blobs": world.blobs,
        "active": world.active[phase],
    }
    script = directory / f"{phase}.lua"
    script.write_text(
        lua_script(
            ops, mix.schedule(ops), pools, token=server.token, tag=_tag(phase), threads=args.threads
        ),
        encoding="utf-8",
    )
    script.chmod(0o600)  # it holds the server's token
    return run_wrk(
        server.url,
        script,
        connections=args.connections,
        threads=args.threads,
        duration=duration,
    )


def measure(
    target: str, ops: Sequence[mix.Operation], world: mix.World, args: argparse.Namespace
) -> Row:
    row = Row(target)
    row.details["load_average_before"] = os.getloadavg()
    with (
        servers.running(target, serve_args=args.serve_args) as server,
        tempfile.TemporaryDirectory(prefix="bench-load-") as directory,
    ):
        row.details["pid"] = server.pid
        client = CallStoreClient(server.url, server.token)
        try:
            started = time.monotonic()
            if server.is_store:
                seed(client, world)
            row.details["seed_seconds"] = round(time.monotonic() - started, 2)
            row.problems += preflight(client, ops, world, server.is_store)
            if row.problems:
                return row
            phases = {}
            if args.warmup > 0:
                row.warmup = _phase(
                    server, ops, world, "warmup", args.warmup, args, Path(directory)
                )
                phases["warmup"] = row.warmup
                row.problems += _errors("warm-up", row.warmup)
            cpu_before = cpu_seconds(server.pid)
            row.timed = _phase(server, ops, world, "timed", args.duration, args, Path(directory))
            phases["timed"] = row.timed
            row.details["server_cpu_s"] = round(cpu_seconds(server.pid) - cpu_before, 2)
            row.problems += _errors("timed run", row.timed)
            if server.is_store:
                row.problems += audit(client, world, ops, phases, args.connections)
        finally:
            client.close()
            row.details["load_average_after"] = os.getloadavg()
            if row.problems:
                row.details["server_stderr_tail"] = [line.rstrip() for line in server.log_tail()]
    return row


def measure_or_report(
    target: str, ops: Sequence[mix.Operation], world: mix.World, args: argparse.Namespace
) -> Row:
    """:func:`measure`, or a failed row saying why it could not run."""
    try:
        return measure(target, ops, world, args)
    except Exception as error:  # one target's failure must not lose the others' results
        return Row(target, problems=[f"could not run: {type(error).__name__}: {error}"])


def _errors(what: str, result: LoadResult) -> list[str]:
    errors = {kind: count for kind, count in result.errors.items() if count}
    if not errors:
        return []
    kinds = ", ".join(f"{count} {kind}" for kind, count in errors.items())
    return [f"{what}: {kinds} errors (status = non-2xx answers)"]


# -- verdicts ----------------------------------------------------------------------


def judge(rows: list[Row], connections: int) -> None:
    """Fill each row's ratios and goal verdicts (met: True, False, or None = unknown)."""
    by_target = {row.target: row for row in rows}
    for row in rows:
        for name in ("reference", "ceiling"):
            other = by_target.get(name)
            ours, theirs = row.ops_per_second, other.ops_per_second if other else None
            row.ratios[f"vs_{name}"] = ours / theirs if ours and theirs else None
            # The same ratio from CPU per request, which other load on the machine
            # moves less (the backends' own servers' CPU is not counted).
            ours, theirs = row.cpu_ms_per_op, other.cpu_ms_per_op if other else None
            row.ratios[f"cpu_vs_{name}"] = theirs / ours if ours and theirs else None
        for measure_, threshold in GOALS.get(row.target, []):
            goal: dict[str, Any] = {"measure": measure_, "threshold": threshold}
            if measure_ == "p99_ms":
                value = row.timed.latency_ms["p99"] if row.clean and row.timed else None
                goal["value"] = value
                if connections != P99_GOAL_CONNECTIONS:
                    goal["met"] = None
                    goal["why"] = f"defined at {P99_GOAL_CONNECTIONS} connections"
                else:
                    goal["met"] = None if value is None else value < threshold
            else:
                value = row.ratios[measure_]
                goal["value"] = value
                goal["met"] = None if value is None else value >= threshold
            if not row.clean:
                goal["met"] = False
                goal["why"] = "the row has errors"
            row.goals.append(goal)


def _goal_text(goal: dict[str, Any]) -> str:
    value, threshold = goal["value"], goal["threshold"]
    if goal["measure"] == "p99_ms":
        wanted = f"p99 < {threshold:g} ms"
        shown = "?" if value is None else f"{value:.1f}"
    elif goal["measure"] == "vs_ceiling":
        wanted = f">= {threshold:.0%} ceiling"
        shown = "?" if value is None else f"{value:.0%}"
    else:
        wanted = f">= {threshold:g}x ref"
        shown = "?" if value is None else f"{value:.1f}x"
    verdict = {True: "ok", False: "FAIL", None: "n/a"}[goal["met"]]
    return f"{wanted}: {shown} {verdict}"


def _row_verdict(row: Row) -> str:
    if not row.clean:
        return "FAIL (errors)"
    if not row.goals:
        return "-"
    verdicts = {goal["met"] for goal in row.goals}
    overall = "FAIL" if False in verdicts else "n/a" if None in verdicts else "PASS"
    return f"{overall}: " + "; ".join(_goal_text(goal) for goal in row.goals)


def table(rows: list[Row]) -> str:
    lines = [
        "| target | ops/s | p50 ms | p99 ms | errors | CPU ms/op | vs reference | vs ceiling "
        "| target met |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        timed = row.timed
        errors = sum(result.error_count for result in (row.timed, row.warmup) if result)
        if row.problems and not errors:
            errors = len(row.problems)
        cells = [
            row.target,
            f"{timed.ops_per_second:,.0f}" if timed else "-",
            f"{timed.latency_ms['p50']:.2f}" if timed else "-",
            f"{timed.latency_ms['p99']:.2f}" if timed else "-",
            str(errors),
            "-" if row.cpu_ms_per_op is None else f"{row.cpu_ms_per_op:.3f}",
            *(
                "-" if row.ratios.get(key) is None else f"{row.ratios[key]:.2f}"
                for key in ("vs_reference", "vs_ceiling")
            ),
            _row_verdict(row),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the machine -------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    completed = subprocess.run(
        ["git", *args], cwd=servers.ROOT, capture_output=True, text=True, check=False
    )
    return completed.stdout.strip() if completed.returncode == 0 else None


def machine() -> dict[str, Any]:
    """What the numbers depend on: this is a shared, noisy machine."""
    cpu = None
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            name: _version(name)
            for name in (
                "bridge-store",
                "uvicorn",
                "starlette",
                "httptools",
                "uvloop",
                "cursor-sdk",
                "asyncpg",
                "redis",
                "obstore",
                "moto",
            )
        },
        "wrk": wrk_version(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "bridge_store", "backends")),
    }


# -- the command -------------------------------------------------------------------


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench load", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--targets",
        default=",".join(servers.TARGETS),
        help=f"comma-separated, run in this order (default: {','.join(servers.TARGETS)})",
    )
    parser.add_argument(
        "--mix",
        default="realistic",
        choices=mix.mix_names(),
        help="the realistic mix, or one operation alone (default: realistic)",
    )
    parser.add_argument("--connections", type=int, default=16, help="(default: 16)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default: 1)")
    # wrk takes whole seconds.
    parser.add_argument("--duration", type=int, default=10, help="seconds (default: 10)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds, 0 for none (default: 3)")
    parser.add_argument(
        "--json", type=Path, help="where to write results (default: bench/results/load-*.json)"
    )
    parser.add_argument(
        "--serve-args",
        default="",
        metavar="ARGS",
        help="more options for every bridge-store serve target, split on spaces, e.g. "
        "--serve-args=--no-metrics to measure what the metrics cost",
    )
    args = parser.parse_args(argv)
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    unknown = sorted(set(targets) - set(servers.TARGETS))
    if unknown or not targets:
        parser.error(f"unknown targets {unknown}; choose from {','.join(servers.TARGETS)}")
    if not 1 <= args.threads <= args.connections or args.duration <= 0 or args.warmup < 0:
        parser.error("need 1 <= threads <= connections, duration > 0 and warmup >= 0")
    args.targets = targets
    args.serve_args = args.serve_args.split()
    return args


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    # Stopped with SIGTERM, unwind as on Ctrl-C: the servers it started stop, the
    # Postgres database is dropped, the Redis keys deleted.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        wrk_path()
    except FileNotFoundError as error:
        print(f"python -m bench load: {error}", file=sys.stderr)
        return 2
    ops = mix.operations(args.mix)
    world = mix.build_world(active_runs=args.connections)
    started = datetime.datetime.now(datetime.UTC)
    info = machine() | {"load_average_before": os.getloadavg()}
    rows = []
    for target in args.targets:
        print(f"bench load: {target} ...", file=sys.stderr, flush=True)
        row = measure_or_report(target, ops, world, args)
        for problem in row.problems:
            print(f"bench load: {target}: {problem}", file=sys.stderr)
        rows.append(row)
    info["load_average_after"] = os.getloadavg()
    judge(rows, args.connections)
    print(
        f"\nmix {args.mix}, {args.connections} connections, {args.threads} wrk thread(s), "
        f"{args.duration} s after {args.warmup} s warm-up; "
        f"{info['nproc']} CPUs, load average {info['load_average_before'][0]:.2f} before, "
        f"{info['load_average_after'][0]:.2f} after\n"
    )
    print(table(rows))
    path = args.json or RESULTS / f"load-{started:%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "started": started.isoformat(timespec="seconds"),
        "machine": info,
        "settings": {
            "mix": args.mix,
            "connections": args.connections,
            "threads": args.threads,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "serve_args": args.serve_args,
            "operations": [
                {"key": op.key, "weight": op.weight, "body_bytes": _body_bytes(op, world)}
                for op in ops
            ],
        },
        "rows": [row.as_json() for row in rows],
    }
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    failed = any(not row.clean for row in rows) or any(
        goal["met"] is False for row in rows for goal in row.goals
    )
    return 1 if failed else 0


def _body_bytes(op: mix.Operation, world: mix.World) -> int:
    record = world.pool(op.pool, "timed")[0]
    return len(json.dumps(mix.render(op, record), separators=(",", ":")))
