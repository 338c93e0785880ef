"""``serve --workers N``: N processes on one port, each its own pools; memory:// refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from tests.support.processes import descendants, still_running
from tests.support.retention import agent_doc, run_doc
from tests.support.server import CALL_STORE_PATH, serve

AGENT = "agent-3f1c2a4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
RUN = "run-7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d"
WRITERS = 4
APPENDS_PER_WRITER = 40


def _refused(directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", *options],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=directory,
        env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": "a-token-of-sixteen-or-more"},
    )


def test_workers_refuse_a_store_that_lives_in_one_process(tmp_path: Path) -> None:
    completed = _refused(tmp_path, "--store", "memory://", "--workers", "2")
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        "bridge-store: --workers 2 needs a store every worker shares; memory:// lives in "
        "one process's memory: use --workers 1, or a sqlite://, postgresql:// or redis:// store"
    )
    assert not list(tmp_path.iterdir())  # refused before a token file was written


def test_workers_must_be_positive(tmp_path: Path) -> None:
    completed = _refused(tmp_path, "--store", f"sqlite:///{tmp_path}/x.db", "--workers", "0")
    assert completed.returncode == 2
    assert "--workers must be 1 or more, not 0" in completed.stderr


def test_two_workers_on_one_sqlite_file_share_the_port_and_keep_the_log_gapless(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    with serve("--store", url, "--workers", "2", "--no-ui") as server:
        assert server.ready["workers"] == 2
        workers = descendants(server.process.pid)
        assert len(workers) == 2
        server.call(
            "agents", "create", {"agent": agent_doc(AGENT, updated_at=1, status="idle", cwd="/w")}
        )
        server.call("runs", "create", {"run": run_doc(AGENT, RUN, 1, "running", 1)})

        # Each worker draws its own request-id prefix: new connections reach both.
        prefixes = set()
        for _ in range(60):
            with httpx.Client(headers={"Authorization": f"Bearer {server.token}"}) as client:
                response = client.post(
                    server.url + CALL_STORE_PATH,
                    json={"substore": "agents", "method": "get", "input": {"agentId": AGENT}},
                )
            assert response.status_code == 200
            prefixes.add(response.headers["x-request-id"][:16])
            if len(prefixes) == 2:
                break
        assert len(prefixes) == 2

        failures: list[BaseException] = []

        def append(writer: int) -> None:
            client = server.new_client()
            try:
                for number in range(APPENDS_PER_WRITER):
                    event = {
                        "runId": RUN,
                        "eventType": "run_stream_event",
                        "payload": {"writer": writer, "number": number},
                        "createdAt": 2,
                    }
                    client.call("runEvents", "append", event)
            except BaseException as error:
                failures.append(error)
            finally:
                client.close()

        threads = [threading.Thread(target=append, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not failures
        events = server.events(RUN)
        total = WRITERS * APPENDS_PER_WRITER
        assert [event["seq"] for event in events] == list(range(1, total + 1))
        seen = {(e["payload"]["writer"], e["payload"]["number"]) for e in events}
        assert len(seen) == total

        process = server.process
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert still_running(sorted(workers)) == []


def test_a_worker_that_dies_stops_the_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    with serve("--store", url, "--workers", "2", "--no-ui") as server:
        workers = sorted(descendants(server.process.pid))
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        assert server.process.wait(timeout=60) == 1
        assert still_running(workers) == []
        assert any("a worker exited unexpectedly" in line for line in server.stderr_lines)
