"""``python -m bench COMMAND [options]``: the maintained benchmarks and diagnostics.

Each command is one module's ``main(argv) -> exit status``, listed in :data:`COMMANDS`
with what it measures; docs/benchmarks.md and the design documents say what each
has found.
"""

from __future__ import annotations

import importlib
import sys

#: command: (module in bench/, what it measures)
COMMANDS: dict[str, tuple[str, str]] = {
    "load": ("load", "every backend, the SDK's reference server and a bare ceiling under wrk"),
    "export-runs": ("export_runs", "the mix's ops/s with serve --export-runs on and off"),
    "cpu-per-call": (
        "cpu_per_call",
        "CPU time per call of the whole server path, in process: memory, SQLite, ceiling",
    ),
    "blob-memory": (
        "blob_memory",
        "peak RSS while a 64 MiB checkpoint goes in and out; small calls beside 2 gets",
    ),
    "scaling": ("scaling", "list pages at 1k vs 100k rows (1M events) per backend"),
    "e2e": ("e2e", "the real bridge: bridge-store vs its built-in store"),
    "backend-limit": (
        "backend_limit",
        "the realistic mix's statements and commands sent by the drivers alone",
    ),
    "sql-append": ("sql_append", "runEvents.append on SQLite and Postgres, round trips"),
    "sql-blobs": ("sql_blobs", "checkpoint blobs on SQL: time and Python memory"),
    "redis-events": ("redis_events", "Redis appends, tail reads and list pages, in process"),
    "redis-cluster": ("redis_cluster", "Redis appends: standalone vs cluster vs cluster + WAIT"),
    "s3-backend": ("s3_backend", "the S3 backend's hot paths against a local moto server"),
    "scale-out": ("scale_out", "1, 2, 4 serve processes on one Postgres and one Redis"),
    "failover": ("failover", "Postgres primary -> standby under append load: outage and loss"),
    "viewer-first-screen": (
        "viewer_first_screen",
        "the history viewer: a 10,000-event run's transcript, server and Chromium",
    ),
    "search-index": (
        "search_index",
        "the viewer's search on SQL: appends with and without the index, index vs scan",
    ),
    "overview": (
        "overview",
        "the viewer's overview and run list over 100,000 runs: SQLite, Postgres, the scan",
    ),
    "http-limits": ("http_limits", "abusive HTTP clients: huge or slow heads, idle floods"),
    "copy": ("copy", "bridge-store copy of a large SQLite store into Postgres: items/s, peak RSS"),
    "retention": ("retention", "prune (dry run and real) and gc over a seeded store"),
    "demo-fill": ("demo_fill", "bridge-store demo's sample generated and written: seconds"),
    "import-local": (
        "import_local",
        "import-local of a large built-in SQLite store: items/s and peak RSS",
    ),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: python -m bench COMMAND [options]\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"python -m bench: unknown command {argv[0]!r}; one of: {', '.join(COMMANDS)}")
        return 2
    module = importlib.import_module(f"bench.{command[0]}")
    status: int = module.main(argv[1:])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
