"""Failover under append load: what clients see, and what survives.

    python -m bench failover [--replication sync|async] [--order promote|crash]
                             [--workers 4] [--before 2] [--after 2]

Starts a private Postgres primary and streaming standby (``bench.pg_cluster``) and
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
docs/sql.md describes. The same :class:`Appenders` drive tests/test_postgres_failover.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge_store.client import start_serve
from bridge_store.errors import Code, ConnectError

from .load_checks import CallStoreClient
from .pg_cluster import PostgresCluster, postgres_cluster
from .services import execute

#: A bound on every wait, so a broken server fails a run instead of hanging it.
WAIT_SECONDS = 120.0


class AppendClient:
    """A CallStore client whose failed calls raise the server's ConnectError."""

    def __init__(self, url: str, token: str) -> None:
        self._client = CallStoreClient(url, token)

    def append(self, data: dict[str, Any]) -> dict[str, Any]:
        status, answer = self._client.send(
            json.dumps({"substore": "runEvents", "method": "append", "input": data})
        )
        if status != 200:
            raise ConnectError(Code(answer["code"]), answer.get("message", ""))
        output: dict[str, Any] = answer["output"]
        return output

    def close(self) -> None:
        self._client.close()


@dataclass
class Outcome:
    """One append: its payload, when it was answered, and the event or the error."""

    payload: list[int]
    answered: float
    event: dict[str, Any] | None = None
    error: ConnectError | None = None


@dataclass
class Worker:
    run_id: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def acknowledged(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.event is not None]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.error is not None]


class Appenders:
    """Threads appending keyless events, one run each, recording every outcome.

    A context manager: the threads start on entry and stop on exit.
    """

    def __init__(self, workers: int, make_client: Callable[[], AppendClient]) -> None:
        self.workers = [Worker(f"run-{n}") for n in range(workers)]
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, args=(worker, make_client()), daemon=True)
            for worker in self.workers
        ]

    def __enter__(self) -> Appenders:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=WAIT_SECONDS)

    def _work(self, worker: Worker, client: AppendClient) -> None:
        index = 0
        try:
            while not self._stop.is_set():
                payload = [self.workers.index(worker), index]
                index += 1
                data = {"runId": worker.run_id, "eventType": "t", "payload": payload}
                try:
                    event = client.append(data)
                    outcome = Outcome(payload, time.monotonic(), event=event)
                except ConnectError as error:
                    outcome = Outcome(payload, time.monotonic(), error=error)
                with self._changed:
                    worker.outcomes.append(outcome)
                    self._changed.notify_all()
        finally:
            client.close()

    def counts(self) -> list[int]:
        """Acknowledged appends of each worker so far."""
        with self._changed:
            return [len(worker.acknowledged) for worker in self.workers]

    def wait_for(self, counts: list[int]) -> None:
        """Until worker ``n`` has ``counts[n]`` acknowledged appends (AssertionError if
        that takes longer than :data:`WAIT_SECONDS`)."""

        def reached() -> bool:
            return all(
                len(worker.acknowledged) >= n
                for worker, n in zip(self.workers, counts, strict=True)
            )

        with self._changed:
            if not self._changed.wait_for(reached, timeout=WAIT_SECONDS):
                done = [len(worker.acknowledged) for worker in self.workers]
                errors = [str(o.error) for worker in self.workers for o in worker.failed[-2:]]
                raise AssertionError(f"appends stalled at {done} of {counts}: {errors}")


@dataclass
class Audit:
    """What a worker's run log holds against what its client was told."""

    seqs_gapless: bool
    lost: list[list[int]]  # acknowledged, not stored (payloads)
    changed: list[list[int]]  # acknowledged, stored differently
    extra: int  # stored, though the append was answered with an error


def audit(worker: Worker, stored: list[dict[str, Any]]) -> Audit:
    seqs = [event["seq"] for event in stored]
    by_payload = {tuple(event["payload"]): event for event in stored}
    lost, changed = [], []
    for outcome in worker.acknowledged:
        found = by_payload.get(tuple(outcome.payload))
        if found is None:
            lost.append(outcome.payload)
        elif found != outcome.event:
            changed.append(outcome.payload)
    failed = {tuple(outcome.payload) for outcome in worker.failed}
    extra = sum(1 for payload in by_payload if payload in failed)
    return Audit(seqs == list(range(1, len(seqs) + 1)), lost, changed, extra)


def read_log(client: CallStoreClient, run_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    offset = "0"
    while True:
        page = client.call("runEvents", "list", {"runId": run_id, "afterOffset": offset})
        events += page["items"]
        if "nextOffset" not in page:
            return events
        offset = page["nextOffset"]


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
