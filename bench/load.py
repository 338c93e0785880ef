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
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from testkit.callstore import CallStoreClient

from . import mix, servers
from .load_checks import audit, phase_tag, preflight, seed
from .load_report import Row, judge, open_loop_table, table
from .loadgen import LoadResult, lua_script, run_wrk, wrk_path
from .machine import cpu_seconds, machine, settle
from .openloop import OpenLoopResult, RequestSource, run_open_loop

RESULTS = Path(__file__).parent / "results"
#: Below this share of the asked rate, the server did not keep up: the open-loop run
#: measured a queue, and the row fails.
OPEN_LOOP_KEPT_UP = 0.95


# -- one target --------------------------------------------------------------------


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
            ops,
            mix.schedule(ops),
            pools,
            token=server.token,
            tag=phase_tag(phase),
            threads=args.threads,
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


def _open_phase(
    server: servers.Server,
    ops: Sequence[mix.Operation],
    world: mix.World,
    measured: float,
    args: argparse.Namespace,
) -> OpenLoopResult:
    """A fixed-rate run at ``--open-rate``, or ``--open-loop`` times the closed-loop
    ops/s just measured."""
    pools = {"agents": world.agents, "blobs": world.blobs, "active": world.active["open"]}
    source = RequestSource(ops, mix.schedule(ops), pools, tag=phase_tag("open"))
    return run_open_loop(
        server.url,
        server.token,
        source,
        rate=args.open_rate or max(1.0, measured * args.open_loop),
        connections=args.connections,
        duration=args.duration,
    )


def measure(
    target: str, ops: Sequence[mix.Operation], world: mix.World, args: argparse.Namespace
) -> Row:
    row = Row(target)
    if args.settle > 0:
        waited, _ = settle(args.settle)
        row.details["settle_waited_s"] = waited
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
            if args.open_loop > 0 and not row.problems:
                row.open_loop = _open_phase(server, ops, world, row.timed.ops_per_second, args)
                phases["open"] = row.open_loop.load
                row.details["open_server_cpu_s"] = round(cpu_seconds(server.pid) - cpu_before, 2)
                row.details["open_server_cpu_s"] -= row.details["server_cpu_s"]
                row.problems += _errors("open-loop run", row.open_loop.load)
                if row.open_loop.achieved_rate < OPEN_LOOP_KEPT_UP * row.open_loop.rate:
                    row.problems.append(
                        f"open-loop run: {row.open_loop.achieved_rate:,.0f} answers/s "
                        f"for {row.open_loop.rate:,.0f} requests/s asked"
                    )
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
        "--open-loop",
        type=float,
        default=0.5,
        metavar="FRACTION",
        help=(
            "after the timed run, a fixed-rate run at FRACTION x its ops/s, latency "
            "measured from each request's due time; 0 for none (default: 0.5)"
        ),
    )
    parser.add_argument(
        "--open-rate",
        type=float,
        default=0.0,
        metavar="CALLS_PER_S",
        help=(
            "the fixed-rate run at this many calls a second for every target instead "
            "(1000: about 50 bridge turns a second, issue 22's latency target)"
        ),
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=1.0,
        metavar="LOAD",
        help=(
            "before each target, wait (at most 3 minutes) until the 1-minute load "
            "average is under LOAD; 0 to start each target at once (default: 1.0)"
        ),
    )
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
    if args.settle < 0:
        parser.error("--settle is a load average, 0 for no wait")
    if not 0 <= args.open_loop <= 1:
        parser.error("--open-loop is a fraction between 0 and 1")
    if args.open_rate < 0 or (args.open_rate and not args.open_loop):
        parser.error("--open-rate is a positive rate, and needs the open-loop run")
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
    judge(rows, connections=args.connections, mix=args.mix)
    print(
        f"\nmix {args.mix}, {args.connections} connections, {args.threads} wrk thread(s), "
        f"{args.duration} s after {args.warmup} s warm-up; "
        f"{info['nproc']} CPUs, load average {info['load_average_before'][0]:.2f} before, "
        f"{info['load_average_after'][0]:.2f} after\n"
    )
    print(table(rows))
    if any(row.open_loop for row in rows):
        rate = (
            f"{args.open_rate:,.0f} calls/s"
            if args.open_rate
            else f"{args.open_loop:g} x each target's ops/s above"
        )
        print(
            f"\nopen loop at {rate}, "
            f"{args.connections} connections, {args.duration} s; latency from each "
            "request's due time\n"
        )
        print(open_loop_table(rows))
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
            "open_loop_fraction": args.open_loop,
            "open_loop_rate": args.open_rate or None,
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
