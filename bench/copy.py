"""``bridge-store copy``'s speed and memory: a large SQLite store into Postgres.

A SQLite store is seeded through the backend API (events restored a page at a time,
with seqs, createdAt and every other event keyed, as the bridge writes them): AGENTS
agents of RUNS runs of EVENTS events each, every agent with one BLOB_KIB checkpoint
blob. Then ``bridge-store copy`` runs as a child process into a fresh Postgres
database, twice (the second run finds everything present and skips it, with
``--verify``), and its wall time, items per second and peak RSS are printed::

    python -m bench copy                                  # the issue's size: 1 GiB of blobs
    python -m bench copy --agents 100 --runs 10 --events 100 --blob-kib 1024

Postgres runs in a fresh database (testkit.services), dropped afterwards; the SQLite
file lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.types import Document
from testkit.services import postgres_database, run_async

#: Events restored per call while seeding (the contract's largest page).
SEED_PAGE = 1000
#: About the size of a streamed assistant delta the bridge stores.
TEXT = "The redirect keeps the next parameter now; the tests cover login and logout. " * 3


def event(run_id: str, seq: int, at: int) -> Document:
    return {
        "runId": run_id,
        "seq": seq,
        "offset": str(seq),
        "eventType": "run_stream_event",
        "payload": {"type": "assistant", "message": {"content": [{"type": "text", "text": TEXT}]}},
        "payloadRef": None,
        "idempotencyKey": f"{run_id}:{seq}" if seq % 2 else None,
        "createdAt": at + seq,
    }


async def seed(url: str, agents: int, runs: int, events: int, blob_kib: int) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    stores, tenant, at = opened.stores, "default", 1_760_000_000_000
    blob = os.urandom(blob_kib * 1024)
    try:
        for number in range(agents):
            agent_id = f"agent-{number:06d}"
            for turn in range(1, runs + 1):
                run_id = f"run-{number:06d}-{turn:04d}"
                await stores.runs.create(
                    tenant,
                    {
                        "runId": run_id,
                        "agentId": agent_id,
                        "requestId": None,
                        "turnNumber": turn,
                        "status": "finished",
                        "model": {"id": "composer-2"},
                        "result": None,
                        "error": None,
                        "usageRef": None,
                        "usage": None,
                        "createdAt": at,
                        "updatedAt": at,
                        "startedAt": at,
                        "endedAt": at,
                        "startCheckpointRef": None,
                        "latestCheckpointRef": None,
                    },
                )
                for start in range(1, events + 1, SEED_PAGE):
                    page = [
                        event(run_id, seq, at)
                        for seq in range(start, min(start + SEED_PAGE, events + 1))
                    ]
                    await stores.run_events.restore(tenant, run_id, page)
            # Distinct bytes per agent, without paying os.urandom for each.
            data = number.to_bytes(8, "big") + blob[8:]
            await stores.checkpoints.create(tenant, agent_id, "root", data)
            await stores.agents.create(
                tenant,
                {
                    "agentId": agent_id,
                    "cwd": "/work/project",
                    "status": "idle",
                    "activeRunId": None,
                    "name": f"agent {number}",
                    "createdAt": at,
                    "updatedAt": at + number,
                    "latestCheckpoint": {"schemaVersion": 1, "rootBlobId": "root"},
                    "sdkMetadata": {"blobEncryptionKey": "00" * 32},
                },
            )
    finally:
        await opened.close()


def copy_once(source: str, target: str, *extra: str) -> tuple[float, float, str]:
    """Seconds, the child's peak RSS in MiB, and its summary line."""
    command = [sys.executable, "-m", "bridge_store", "copy", "--from", source, "--to", target]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen([*command, *extra], stdout=out, stderr=err)
        # Reaped here for this child's own rusage.
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"copy failed: {err.read().strip()} {out.read().strip()}")
        # ru_maxrss is in KiB on Linux.
        return seconds, usage.ru_maxrss / 1024, out.read().strip().replace("\n", " | ")


def bench(target: str, directory: Path, agents: int, runs: int, events: int, blob_kib: int) -> None:
    source = f"sqlite:///{directory / 'source.db'}"
    started = time.perf_counter()
    run_async(lambda: seed(source, agents, runs, events, blob_kib))
    size = (directory / "source.db").stat().st_size / 2**20
    print(
        f"source: {agents} agents, {agents * runs} runs, {agents * runs * events} events, "
        f"{agents} blobs of {blob_kib} KiB (seeded in {time.perf_counter() - started:.0f} s; "
        f"SQLite file {size:,.0f} MiB)",
        flush=True,
    )
    items = agents * (1 + runs + runs * events + 1)
    blob_mib = agents * blob_kib / 1024
    for attempt, extra in (("first", ()), ("again", ("--verify",))):
        seconds, peak, line = copy_once(source, target, *extra)
        print(
            f"{attempt:5} {seconds:7.1f} s {items / seconds:9,.0f} items/s "
            f"{blob_mib / seconds:6.1f} MiB/s of blobs, peak RSS {peak:5.0f} MiB | {line}",
            flush=True,
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench copy", description=__doc__)
    parser.add_argument("--to", help="target store URL (default: a fresh Postgres database)")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10, help="runs per agent")
    parser.add_argument("--events", type=int, default=100, help="events per run")
    parser.add_argument("--blob-kib", type=int, default=1024, help="KiB of each agent's blob")
    args = parser.parse_args(argv)
    counts = (args.agents, args.runs, args.events, args.blob_kib)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as directory:
        if args.to:
            bench(args.to, Path(directory), *counts)
            return 0
        with postgres_database() as postgres:
            bench(postgres, Path(directory), *counts)
    return 0
