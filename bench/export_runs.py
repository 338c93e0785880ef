"""What ``serve --export-runs`` costs the calls: the mix's ops/s with the export on and off.

``python -m bench export-runs`` runs ``bench load`` on one target (SQLite by default)
with the ``ending`` mix (the realistic one, every ``runs.update`` ending its run, so
the export has runs to send: 6% of the calls, more than real turns end) in rounds,
each round the export off then on (the order alternating between rounds, so a drift
of the machine falls on both). With it on, the server sends to an OTLP/HTTP receiver
in this process (``testkit/otlp.py``), which decodes what it gets: the report says
how many runs and spans arrived, so an export that silently did nothing cannot pass.

Prints each run's ops/s, the medians and their ratio, with the load average beside
them, and writes the results as JSON. Exit status 0 when the export keeps at least
:data:`TARGET` of the ops/s, 1 otherwise. Each ``bench load`` waits for the 1-minute
load average to fall under ``--settle`` first (the machine is shared).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from testkit.otlp import OtlpReceiver

from . import load
from .machine import machine

RESULTS = Path(__file__).parent / "results"
#: The export may cost at most 5% of the mix's ops/s.
TARGET = 0.95


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench export-runs", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--target", default="sqlite", help="a bench load target (default: sqlite)")
    parser.add_argument("--rounds", type=int, default=3, help="off/on pairs (default: 3)")
    parser.add_argument("--duration", type=int, default=10, help="seconds each (default: 10)")
    parser.add_argument("--connections", type=int, default=16, help="(default: 16)")
    parser.add_argument(
        "--settle",
        type=float,
        default=1.5,
        metavar="LOAD",
        help="before each run, wait until the 1-minute load average is under LOAD (default: 1.5)",
    )
    parser.add_argument("--json", type=Path, help="where to write results")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.duration < 1:
        parser.error("--rounds and --duration must be positive")
    return args


def _ops_per_second(args: argparse.Namespace, export_to: str | None, path: Path) -> dict[str, Any]:
    argv = [
        *("--targets", args.target, "--mix", "ending", "--open-loop", "0"),
        *("--duration", str(args.duration), "--connections", str(args.connections)),
        *("--settle", str(args.settle), "--json", str(path)),
    ]
    if export_to is not None:
        argv.append(f"--serve-args=--export-runs={export_to}")
    status = load.main(argv)
    result = json.loads(path.read_text())
    (row,) = result["rows"]
    if status != 0 and not row["clean"]:
        raise SystemExit(f"bench export-runs: the load run failed: {row['problems']}")
    return {
        "export": export_to is not None,
        "ops_per_s": row["timed"]["ops_per_s"],
        "p99_ms": row["timed"]["latency_ms"]["p99"],
        # The server's CPU per call: steadier than ops/s on a shared machine.
        "server_cpu_ms_per_op": row["server_cpu_ms_per_op"],
        "load_average_before": result["machine"]["load_average_before"][0],
        "load_average_after": result["machine"]["load_average_after"][0],
    }


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    receiver = OtlpReceiver().start()
    started = datetime.datetime.now(datetime.UTC)
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as directory:
            for round_ in range(args.rounds):
                order = [None, receiver.url] if round_ % 2 == 0 else [receiver.url, None]
                for export_to in order:
                    path = Path(directory) / f"run-{len(runs)}.json"
                    runs.append(_ops_per_second(args, export_to, path))
    finally:
        receiver.stop()
    off = statistics.median(run["ops_per_s"] for run in runs if not run["export"])
    on = statistics.median(run["ops_per_s"] for run in runs if run["export"])
    roots = len(receiver.roots())
    print(f"\nbench export-runs: {args.target}, mix ending, {args.duration} s per run")
    for run in runs:
        print(
            f"  export {'on ' if run['export'] else 'off'}  {run['ops_per_s']:>9,.1f} ops/s  "
            f"p99 {run['p99_ms']:.2f} ms  server CPU {run['server_cpu_ms_per_op'] or 0:.3f} "
            f"ms/op  load average {run['load_average_before']:.2f} -> "
            f"{run['load_average_after']:.2f}"
        )
    ratio = on / off if off else 0.0
    cpu = {
        name: statistics.median(
            run["server_cpu_ms_per_op"] or 0.0 for run in runs if run["export"] == export
        )
        for name, export in (("off", False), ("on", True))
    }
    print(f"server CPU per call, median: off {cpu['off']:.3f} ms, on {cpu['on']:.3f} ms")
    print(
        f"median: off {off:,.1f} ops/s, on {on:,.1f} ops/s: {ratio:.3f} "
        f"(target >= {TARGET}); the receiver got {roots} runs, {len(receiver.spans)} spans"
    )
    path = args.json or RESULTS / f"export-runs-{started:%Y%m%d-%H%M%S}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "started": started.isoformat(timespec="seconds"),
        "machine": machine() | {"load_average_end": os.getloadavg()},
        "target": args.target,
        "runs": runs,
        "median_ops_per_s": {"off": off, "on": on},
        "median_server_cpu_ms_per_op": cpu,
        "ratio": round(ratio, 4),
        "received": {"runs": roots, "spans": len(receiver.spans)},
    }
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"results: {path}", file=sys.stderr)
    return 0 if ratio >= TARGET and roots > 0 else 1
