"""CallStore from Python for the load benches: seed a target, check it, audit its logs.

wrk sends the load (``bench/loadgen.py``); what must be checked answer by answer goes
through ``testkit.callstore.CallStoreClient`` instead: the seeded world, one pre-flight
call of each operation with its answer checked, and after the load every active run's event log
(gapless ``seq``, as many events as appends answered). ``bench load``, ``bench
scale-out`` and ``bench failover`` share them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from testkit.callstore import CallStoreClient

from . import mix
from .loadgen import LoadResult


def phase_tag(phase: str) -> str:
    return f"{mix.PHASES.index(phase):08x}"


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
        tag = phase_tag("preflight")
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
