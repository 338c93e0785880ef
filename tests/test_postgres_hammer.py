"""Two real ``bridge-store serve`` processes on one Postgres database, hammered at once.

8 concurrent clients per server append to the same runs (with and without idempotency
keys, the same keys racing from both servers), race to create the same agents, update
shared agents, and page through agents and runs while all that happens. Afterwards
every run's log is seq 1..N with no gap or duplicate, and nothing acknowledged is lost.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from bridge_store.errors import ConnectError

from .support.server import ServerProcess, start_server

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CLIENTS_PER_SERVER = 8
ROUNDS = 30
HOT_RUNS = ("hot-1", "hot-2", "hot-3")
STATIC_AGENTS = 30
STATIC_RUNS = 30


def agent(agent_id: str, updated_at: int, **extra: Any) -> dict[str, Any]:
    return {"agentId": agent_id, "cwd": "/w", "updatedAt": updated_at, **extra}


def run(run_id: str, turn: int) -> dict[str, Any]:
    return {"runId": run_id, "agentId": "owner", "turnNumber": turn, "status": "queued"}


def start_two_servers(url: str) -> list[ServerProcess]:
    # Started together against the empty database: both run the migrations at once.
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda _: start_server("--store", url), range(2)))


def test_two_servers_hammered_keep_every_log_gapless_and_lose_nothing(
    make_postgres_url: Callable[[], str],
) -> None:
    url = make_postgres_url()
    servers = start_two_servers(url)
    try:
        hammer(servers)
    finally:
        for server in servers:
            server.stop()


def hammer(servers: list[ServerProcess]) -> None:
    setup = servers[0].new_client()
    for index in range(STATIC_AGENTS):
        setup.call("agents", "create", {"agent": agent(f"static-{index:02d}", index)})
    for index in range(STATIC_RUNS):
        setup.call("runs", "create", {"run": run(f"static-{index:02d}", 1000 + index)})
    setup.call("agents", "create", {"agent": agent("shared", 0)})
    setup.close()

    lock = threading.Lock()
    appended: list[dict[str, Any]] = []
    keyed: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    race_wins: collections.Counter[str] = collections.Counter()
    race_losses: collections.Counter[str] = collections.Counter()
    created: list[str] = []
    passes: list[tuple[list[str], list[str]]] = []
    start = threading.Barrier(len(servers) * CLIENTS_PER_SERVER)

    def client_work(server: ServerProcess, number: int) -> None:
        client = server.new_client()
        start.wait()
        try:
            for index in range(ROUNDS):
                run_id = HOT_RUNS[(number + index) % len(HOT_RUNS)]
                payload = {"client": number, "index": index}
                event = client.call(
                    "runEvents", "append", {"runId": run_id, "eventType": "t", "payload": payload}
                )
                with lock:
                    appended.append(event)
                # Every client appends the same keys to one run: one event per key.
                key = f"key-{index}"
                event = client.call(
                    "runEvents",
                    "append",
                    {"runId": "keyed", "eventType": "t", "payload": number, "idempotencyKey": key},
                )
                with lock:
                    keyed[key].append(event)
                # Every client creates the same agent: exactly one wins.
                try:
                    client.call("agents", "create", {"agent": agent(f"race-{index}", 5000)})
                    with lock:
                        race_wins[f"race-{index}"] += 1
                except ConnectError as error:
                    with lock:
                        race_losses[f"race-{index}:{error.code.value}"] += 1
                own = f"own-{number}-{index}"
                client.call("agents", "create", {"agent": agent(own, 10_000 + index)})
                client.call("runs", "create", {"run": run(own, index)})
                with lock:
                    created.append(own)
                client.call(
                    "agents", "update", {"agent": agent("shared", 20_000 + index, by=number)}
                )
                if index == ROUNDS // 2:
                    # Page through while everyone else writes (small pages: many cursors).
                    agents = [a["agentId"] for a in client.list_all("agents", {"limit": 10})]
                    runs = [r["runId"] for r in client.list_all("runs", {"limit": 10})]
                    with lock:
                        passes.append((agents, runs))
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=len(servers) * CLIENTS_PER_SERVER) as pool:
        futures = [
            pool.submit(client_work, server, number)
            for number, server in enumerate(
                server for server in servers for _ in range(CLIENTS_PER_SERVER)
            )
        ]
        for future in futures:
            future.result()

    checker = servers[1].new_client()
    try:
        clients = len(servers) * CLIENTS_PER_SERVER
        # Gapless, duplicate-free logs holding exactly what was acknowledged.
        for run_id in HOT_RUNS:
            stored = checker.events(run_id)
            assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
            mine = sorted(
                (e for e in appended if e["runId"] == run_id), key=lambda e: int(e["seq"])
            )
            assert stored == mine
        assert sum(len(checker.events(r)) for r in HOT_RUNS) == clients * ROUNDS

        keyed_log = checker.events("keyed")
        assert [e["seq"] for e in keyed_log] == list(range(1, ROUNDS + 1))
        by_key = {e["idempotencyKey"]: e for e in keyed_log}
        for key, answers in keyed.items():
            assert len(answers) == clients
            assert all(answer == by_key[key] for answer in answers), key

        assert all(race_wins[f"race-{i}"] == 1 for i in range(ROUNDS)), race_wins
        assert race_losses == {f"race-{i}:already_exists": clients - 1 for i in range(ROUNDS)}

        agents = {a["agentId"]: a for a in checker.list_all("agents", {"limit": 50})}
        runs = {r["runId"] for r in checker.list_all("runs", {"limit": 50})}
        assert set(created) <= set(agents)
        assert set(created) <= runs
        assert agents["shared"]["updatedAt"] == 20_000 + ROUNDS - 1

        # Rows nobody touched came exactly once in every pass made during the writes.
        static = [f"static-{index:02d}" for index in range(STATIC_AGENTS)]
        assert passes
        for agent_ids, run_ids in passes:
            assert [a for a in agent_ids if a.startswith("static-")] == static[::-1]
            assert [r for r in run_ids if r.startswith("static-")] == static[:STATIC_RUNS]
            assert len(set(run_ids)) == len(run_ids)
    finally:
        checker.close()
