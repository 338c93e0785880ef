"""``import-local``'s speed and memory: a large built-in SQLite store into SQLite and Postgres.

The real bridge (offline, the stand-in Cursor API, a private ``HOME``) writes one
workspace store with one agent and one run, so the files have exactly its schema
and rows; that agent, run and its events are then cloned under new ids into AGENTS
agents of RUNS runs of EVENTS events each, every agent with one BLOB_KIB checkpoint
blob in its own ``store.db`` (the SDK's blob table). Then ``bridge-store import-local``
runs as a child process into each target, twice (the second run finds everything
present), and its wall time, items per second and peak RSS are printed::

    python -m bench import-local                        # SQLite and Postgres
    python -m bench import-local --agents 50 --store sqlite:///x.db

Needs the ``client`` extra (the bridge). Postgres runs in a fresh database
(testkit.services), dropped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bridge_store.client import BRIDGE_READY_PREFIX, BridgeProcess, bridge_endpoint, bridge_path
from bridge_store.client._process import START_TIMEOUT_SECONDS, start
from bridge_store.lifecycle.builtin_sqlite import agent_directory, find_stores
from testkit.cursor_api import MODEL_ID, CursorApiStub
from testkit.services import postgres_database


def one_real_run(home: Path, workspace: Path) -> Path:
    """The store directory after the real bridge created one agent and ran it once."""
    with CursorApiStub() as api:
        env = {**os.environ, "HOME": str(home), "CURSOR_BACKEND_URL": api.url}
        argv = [bridge_path(), "--workspace", str(workspace)]
        process, pump, ready = start(
            argv, env, BRIDGE_READY_PREFIX, None, START_TIMEOUT_SECONDS, "cursor-sdk-bridge", 10.0
        )
        url, token = bridge_endpoint(ready)
        bridge = BridgeProcess(
            process=process, ready=ready, pump=pump, url=url, auth_token=token, store_url=""
        )
        with bridge, bridge.client() as client:
            local = {"cwd": str(workspace)}
            agent = client.agents.create({"model": MODEL_ID, "api_key": "k", "local": local})
            agent.send("hello").wait()
    (store,) = find_stores(home)
    return store


def _rows(index: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cursor = index.execute(f"SELECT * FROM {table}")  # noqa: S608 - our table names
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _insert(index: sqlite3.Connection, table: str, rows: Iterator[dict[str, Any]]) -> None:
    first = next(rows)
    columns = list(first)
    marks = ", ".join("?" * len(columns))
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608 - ours
    index.execute(sql, [first[column] for column in columns])
    index.executemany(sql, ([row[column] for column in columns] for row in rows))


def clone(store: Path, agents: int, runs: int, events: int, blob_kib: int) -> None:
    """Grow the store by cloning its one agent, run and events under new ids."""
    with contextlib.closing(sqlite3.connect(store / "index.db", isolation_level=None)) as index:
        (agent,) = _rows(index, "agents")
        (run,) = _rows(index, "runs")
        template_events = _rows(index, "run_events")
        index.execute("BEGIN")
        for number in range(agents):
            agent_id = f"agent-bench-{number:06d}"
            _insert(index, "agents", iter([{**agent, "agent_id": agent_id}]))
            for turn in range(1, runs + 1):
                run_id = f"run-bench-{number:06d}-{turn:04d}"
                _insert(
                    index,
                    "runs",
                    iter([{**run, "run_id": run_id, "agent_id": agent_id, "turn_number": turn}]),
                )
                payload = template_events[1]["payload_json"]
                payload = payload.replace(agent["agent_id"], agent_id)
                payload = payload.replace(run["run_id"], run_id)
                _insert(
                    index,
                    "run_events",
                    (
                        {**template_events[1], "run_id": run_id, "seq": seq, "offset": str(seq)}
                        | {"payload_json": payload}
                        for seq in range(1, events + 1)
                    ),
                )
            _blob_store(store, agent_id, blob_kib)
        index.execute("COMMIT")


def _blob_store(store: Path, agent_id: str, blob_kib: int) -> None:
    directory = agent_directory(store, agent_id)
    directory.mkdir(parents=True, mode=0o700)
    data = os.urandom(blob_kib * 1024)
    with contextlib.closing(sqlite3.connect(directory / "store.db")) as blobs:
        blobs.execute("PRAGMA journal_mode = WAL")
        blobs.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
        blobs.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        blobs.execute("INSERT INTO blobs VALUES (?, ?)", (hashlib.sha256(data).hexdigest(), data))
        blobs.commit()


def import_once(url: str, home: Path) -> tuple[float, float, str]:
    """Seconds, the child's peak RSS in MiB, and its first output line."""
    command = [sys.executable, "-m", "bridge_store", "import-local", "--store", url]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen([*command, "--from", str(home)], stdout=out, stderr=err)
        # Reaped here, not by Popen, for this child's own rusage (RUSAGE_CHILDREN would
        # count the bridge started earlier too).
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"import-local failed ({child.returncode}): {err.read().strip()}")
        # ru_maxrss is in KiB on Linux.
        return seconds, usage.ru_maxrss / 1024, out.readline().strip()


def bench(urls: list[str], agents: int, runs: int, events: int, blob_kib: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        home, workspace = Path(directory) / "home", Path(directory) / "ws"
        home.mkdir()
        workspace.mkdir()
        store = one_real_run(home, workspace)
        started = time.perf_counter()
        clone(store, agents, runs, events, blob_kib)
        size = (store / "index.db").stat().st_size / 2**20
        print(
            f"built-in store: {agents + 1} agents, {agents * runs + 1} runs, "
            f"{agents * runs * events + 3} events, {agents} blobs of {blob_kib} KiB "
            f"(cloned in {time.perf_counter() - started:.1f} s; index.db {size:.0f} MiB)"
        )
        items = agents * (1 + runs + runs * events + 1) + 5
        for url in urls:
            scheme = url.split(":", 1)[0]
            for attempt in ("first", "again"):
                seconds, peak, line = import_once(url, home)
                print(
                    f"{scheme:10} {attempt:5} {seconds:7.1f} s {items / seconds:9,.0f} items/s "
                    f"peak RSS {peak:6.0f} MiB | {line}"
                )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench import-local", description=__doc__)
    parser.add_argument("--store", action="append", help="target store URL (repeatable)")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--runs", type=int, default=10, help="runs per agent")
    parser.add_argument("--events", type=int, default=100, help="events per run")
    parser.add_argument("--blob-kib", type=int, default=256, help="KiB of each agent's blob")
    args = parser.parse_args(argv)
    counts = (args.agents, args.runs, args.events, args.blob_kib)
    if args.store:
        bench(args.store, *counts)
        return 0
    with tempfile.TemporaryDirectory() as directory, postgres_database() as postgres:
        bench([f"sqlite:///{directory}/bench.db", postgres], *counts)
    return 0
