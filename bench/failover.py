"""Failover under append load: what clients see, and what survives.

    python -m bench failover [--replication sync|async] [--order promote|crash]
                             [--workers 4] [--before 2] [--after 2]

Starts a private Postgres primary and streaming standby (``testkit.pg_cluster``) and
``bridge-store serve`` on the multi-host URL
(``postgresql://primary,standby/db?target_session_attrs=read-write``). ``--workers``
threads append keyless events to a run each, over HTTP, as fast as answers come. After
``--before`` seconds the cluster fails over, and the run goes on ``--after`` seconds
more:

- ``--order promote`` (a planned failover, as a failover tool does it): promote the
  standby, then stop the primary (fast shutdown);
- ``--order crash``: kill the primary (immediate shutdown, no WAL handed over), then
  promote the standby.

Then every run's log is read back from the new primary. Reported: acknowledged appends
before and after, failed calls by Connect code, each worker's longest time between two
acknowledged appends (the gap the failover made), and acknowledged appends that are
not stored (lost) or stored but answered as failed (extra). With
``sync`` replication none may be lost; with ``async`` the loss is the window
docs/sql.md describes. The same appenders (``testkit.appenders``) drive
tests/test_postgres_failover.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from typing import Any

from bridge_store.client import start_serve
from bridge_store.errors import Code
from testkit.appenders import AppendClient, Appenders, audit, read_log
from testkit.callstore import CallStoreClient
from testkit.pg_cluster import PostgresCluster, postgres_cluster
from testkit.services import execute


def fail_over(cluster: PostgresCluster, order: str) -> None:
    if order == "promote":
        cluster.failover()
    else:
        cluster.crash_primary()
        cluster.promote()


def measure(args: argparse.Namespace) -> dict[str, Any]:
    synchronous = args.replication == "sync"
    with postgres_cluster(standby=True, synchronous=synchronous) as cluster:
        execute(cluster.primary.url(), "CREATE DATABASE bridge_store")
        store = cluster.multi_host_url("bridge_store")
        with start_serve(["--port", "0", "--store", store, "--log-level", "error"]) as server:
            with Appenders(
                args.workers, lambda: AppendClient(server.url, server.auth_token)
            ) as appenders:
                time.sleep(args.before)
                started = time.monotonic()
                fail_over(cluster, args.order)
                failed_over = time.monotonic()
                at_failover = appenders.counts()
                appenders.wait_for([n + 1 for n in at_failover])
                time.sleep(args.after)
            reader = CallStoreClient(server.url, server.auth_token)
            try:
                logs = [read_log(reader, worker.run_id) for worker in appenders.workers]
            finally:
                reader.close()
    audits = [audit(w, log) for w, log in zip(appenders.workers, logs, strict=True)]
    # Each worker's longest time without an acknowledged append: the failover's gap.
    outages = []
    for worker in appenders.workers:
        answered = [outcome.answered for outcome in worker.acknowledged]
        outages.append(max(b - a for a, b in itertools.pairwise(answered)))
    codes: dict[str, int] = {}
    for worker in appenders.workers:
        for outcome in worker.failed:
            assert outcome.error is not None
            codes[outcome.error.code.value] = codes.get(outcome.error.code.value, 0) + 1
    return {
        "replication": args.replication,
        "order": args.order,
        "workers": args.workers,
        "failover_commands_s": round(failed_over - started, 3),
        "acknowledged_before": sum(at_failover),
        "acknowledged_total": sum(len(w.acknowledged) for w in appenders.workers),
        "failed_by_code": codes,
        "longest_gap_s": {
            "median": round(statistics.median(outages), 3),
            "max": round(max(outages), 3),
        },
        "lost": sum(len(a.lost) for a in audits),
        "changed": sum(len(a.changed) for a in audits),
        "extra": sum(a.extra for a in audits),
        "gapless": all(a.seqs_gapless for a in audits),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench failover", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--replication", choices=["sync", "async"], default="sync")
    parser.add_argument("--order", choices=["promote", "crash"], default="promote")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--before", type=float, default=2.0, help="seconds (default: 2)")
    parser.add_argument("--after", type=float, default=2.0, help="seconds (default: 2)")
    args = parser.parse_args(argv)
    result = measure(args)
    print(json.dumps(result, indent=2))
    clean = result["gapless"] and not result["changed"]
    clean = clean and set(result["failed_by_code"]) <= {Code.UNAVAILABLE.value}
    if args.replication == "sync":
        clean = clean and not result["lost"]
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
