"""Append load over HTTP that records what every client was told, and its audit.

:class:`Appenders` runs threads that each append keyless events to a run of their own,
as fast as answers come, keeping each outcome (the stored event, or the Connect
error); :func:`audit` compares a run's log, read back with :func:`read_log`, with
what its client was told. tests/test_postgres_failover.py,
tests/test_redis_cluster_failover.py and ``python -m bench failover`` drive failovers
under them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge_store.errors import Code, ConnectError

from .callstore import CallStoreClient

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
