"""Peak RSS of ``bridge-store serve`` while big checkpoint blobs go in and out, and
how long a small call waits beside concurrent gets of them.

    python -m bench blob-memory [--mib 64] [--readers 2] [--backends memory,sqlite,...]

For each backend a fresh ``bridge-store serve`` child gets ``checkpoints.create``
with a ``--mib`` MiB blob, base64 inside JSON as the bridge sends it, then
``checkpoints.get`` of it. Before each call the child's peak RSS is reset (Linux:
``5`` into ``/proc/PID/clear_refs``) and its RSS read as the baseline; after the call
``VmHWM`` is its peak. Reported per call: peak minus baseline and the peak itself, in
MiB and as multiples of the blob (the target is a peak increase under 4x). A small
blob goes through first, so lazy imports and connections are not counted.

Then ``--readers`` processes each get one of those blobs at once (the answers read as
they stream, never held), while this process sends small calls (``agents.list``, one
every 10 ms) and times them: reported are the peak's increase over the baseline for
the concurrent gets together, and the small calls' p50, p99 and slowest (targets:
p99 under 100 ms, peak a bounded multiple of the blob). The load average is printed
beside the figures: the machine is shared.

``--agents-in-memory`` serves the agents substore (the small calls) from memory, the
rest from the backend: the small calls then time the server alone, not also the
backend's server. moto, the S3 server here, is one Python process that answers the
small calls' LISTs and GETs only between its work on the 80 MiB GETs, which real S3
does not.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.scaling_targets import make_target
from bridge_store.client import start_sidecar
from bridge_store.rpc.connect import CALL_STORE_PATH

BACKENDS = ("memory", "sqlite", "postgres", "redis", "s3")
MIB = 1024 * 1024


def status_kib(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` memory figure (``VmRSS``, ``VmHWM``) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@dataclass(frozen=True, slots=True)
class Peak:
    baseline_mib: float
    peak_mib: float

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.baseline_mib


class Store:
    """CallStore over HTTP to one serve child, measuring the child's memory per call."""

    def __init__(self, url: str, token: str, pid: int) -> None:
        self.url = url.rstrip("/") + CALL_STORE_PATH
        self.token = token
        self.pid = pid
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
        }
        self._http = httpx.Client(timeout=300.0, headers=self.headers)

    def call(self, body: bytes) -> bytes:
        response = self._http.post(self.url, content=body)
        if response.status_code != 200:
            raise RuntimeError(f"CallStore answered {response.status_code}: {response.text[:200]}")
        return response.content

    def measured(self, body: bytes) -> tuple[bytes, Peak]:
        reset_peak(self.pid)
        baseline = status_kib(self.pid, "VmRSS")
        answer = self.call(body)
        peak = status_kib(self.pid, "VmHWM")
        return answer, Peak(baseline / 1024, peak / 1024)

    def close(self) -> None:
        self._http.close()


def create_body(agent_id: str, blob_id: str, blob: bytes) -> bytes:
    # Built as bytes directly: a json.dumps of the base64 string would be one more copy
    # in this (the client's) process, which is not what is measured.
    return (
        b'{"substore":"checkpoints","method":"create","input":{"agentId":"'
        + agent_id.encode()
        + b'","blobId":"'
        + blob_id.encode()
        + b'","data":"'
        + base64.b64encode(blob)
        + b'"}}'
    )


def get_body(agent_id: str, blob_id: str) -> bytes:
    return (
        b'{"substore":"checkpoints","method":"get","input":{"agentId":"'
        + agent_id.encode()
        + b'","blobId":"'
        + blob_id.encode()
        + b'"}}'
    )


#: One reader of one blob: the answer is read as it streams and only counted.
READER = """
import sys, httpx
url, token, body = sys.argv[1], sys.argv[2], sys.argv[3].encode()
headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
sys.stdin.readline()
with httpx.Client(timeout=600) as http:
    with http.stream("POST", url, content=body, headers=headers) as answer:
        size = sum(len(chunk) for chunk in answer.iter_bytes())
print(answer.status_code, size, flush=True)
"""


@dataclass(frozen=True, slots=True)
class Concurrent:
    """Gets at once: the server's peak over its baseline, and the small calls' times."""

    peak: Peak
    latencies: list[float]

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def concurrent_gets(store: Store, blob_ids: list[str], expected_bytes: int) -> Concurrent:
    """``len(blob_ids)`` readers at once, each getting one blob, beside small calls."""
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, store.url, store.token, get_body("agent", blob_id)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for blob_id in blob_ids
    ]
    latencies: list[float] = []
    done = threading.Event()

    def small_calls() -> None:
        with httpx.Client(timeout=60, headers=store.headers) as http:
            while not done.is_set():
                started = time.perf_counter()
                http.post(store.url, content=SMALL_CALL).raise_for_status()
                latencies.append(time.perf_counter() - started)
                time.sleep(0.01)

    reset_peak(store.pid)
    baseline = status_kib(store.pid, "VmRSS")
    caller = threading.Thread(target=small_calls)
    caller.start()
    try:
        for reader in readers:
            assert reader.stdin is not None
            reader.stdin.write("go\n")
            reader.stdin.flush()
        outcomes = [reader.communicate(timeout=600)[0].split() for reader in readers]
    finally:
        done.set()
        caller.join()
        for reader in readers:
            reader.kill()
    peak = status_kib(store.pid, "VmHWM")
    for outcome in outcomes:
        if outcome[0] != "200" or int(outcome[1]) < expected_bytes:
            raise AssertionError(f"a concurrent get answered {outcome}")
    return Concurrent(Peak(baseline / 1024, peak / 1024), latencies)


SMALL_CALL = b'{"substore":"agents","method":"list","input":{}}'


def measure(
    backend: str, blob: bytes, rounds: int, readers: int, agents_in_memory: bool = False
) -> tuple[list[Peak], list[Peak], list[Concurrent]]:
    creates: list[Peak] = []
    gets: list[Peak] = []
    together: list[Concurrent] = []
    target = make_target(backend, 0)
    try:
        agents = "memory://" if agents_in_memory else None
        with start_sidecar(target.url, agents=agents) as sidecar:
            store = Store(sidecar.url, sidecar.auth_token, sidecar.process.pid)
            try:
                store.call(create_body("warm", "small", b"x" * 1024))
                store.call(get_body("warm", "small"))
                expected = b'"data":"' + base64.b64encode(blob) + b'"'
                for round_ in range(rounds):
                    _, created = store.measured(create_body("agent", f"blob-{round_}", blob))
                    answer, got = store.measured(get_body("agent", f"blob-{round_}"))
                    if expected not in answer:
                        raise AssertionError(f"{backend}: the blob came back different")
                    del answer
                    creates.append(created)
                    gets.append(got)
                for number in range(readers - rounds):  # one stored blob per reader
                    store.call(create_body("agent", f"blob-{rounds + number}", blob))
                text_bytes = len(base64.b64encode(blob))
                ids = [f"blob-{number}" for number in range(readers)]
                for _ in range(rounds):
                    together.append(concurrent_gets(store, ids, text_bytes))
            finally:
                store.close()
    finally:
        target.cleanup()
    return creates, gets, together


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench blob-memory", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--mib", type=int, default=64, help="blob size in MiB")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=3, help="create + get pairs per backend")
    parser.add_argument(
        "--readers", type=int, default=2, help="concurrent gets beside the small calls"
    )
    parser.add_argument(
        "--agents-in-memory",
        action="store_true",
        help="serve the small calls' substore (agents) from memory, to time the server alone",
    )
    args = parser.parse_args(argv)
    if not Path(f"/proc/{os.getpid()}/clear_refs").exists():
        print("blob-memory needs Linux /proc (VmHWM, clear_refs)", file=sys.stderr)
        return 2

    blob = os.urandom(args.mib * MIB)
    print(
        f"{args.mib} MiB blob ({len(base64.b64encode(blob)) / MIB:.1f} MiB as base64); "
        f"median of {args.rounds} rounds; x = multiples of the blob size"
    )
    print(
        f"{'backend':9s} {'call':7s} {'baseline MiB':>13s} {'peak MiB':>9s} "
        f"{'peak-base MiB':>14s} {'growth x':>9s} {'peak x':>7s}"
    )
    together: dict[str, list[Concurrent]] = {}
    for backend in args.backends.split(","):
        creates, gets, together[backend] = measure(
            backend, blob, args.rounds, args.readers, args.agents_in_memory
        )
        for call, peaks in (("create", creates), ("get", gets)):
            baseline = statistics.median(p.baseline_mib for p in peaks)
            peak = statistics.median(p.peak_mib for p in peaks)
            growth = statistics.median(p.growth_mib for p in peaks)
            print(
                f"{backend:9s} {call:7s} {baseline:13.1f} {peak:9.1f} {growth:14.1f} "
                f"{growth / args.mib:9.2f} {peak / args.mib:7.2f}",
                flush=True,
            )
    print(
        f"\n{args.readers} gets at once, beside small calls (agents.list every 10 ms"
        f"{', agents in memory' if args.agents_in_memory else ''}); "
        f"median of {args.rounds} rounds"
    )
    print(
        f"{'backend':9s} {'peak-base MiB':>14s} {'growth x':>9s} {'calls':>6s} "
        f"{'p50 ms':>7s} {'p99 ms':>7s} {'max ms':>7s}"
    )
    for backend, rounds in together.items():
        growth = statistics.median(r.peak.growth_mib for r in rounds)
        calls = statistics.median(len(r.latencies) for r in rounds)
        p50, p99, slowest = (
            statistics.median(r.quantile(q) * 1000 for r in rounds) for q in (0.5, 0.99, 1.0)
        )
        print(
            f"{backend:9s} {growth:14.1f} {growth / args.mib:9.2f} {calls:6.0f} "
            f"{p50:7.1f} {p99:7.1f} {slowest:7.1f}"
        )
    print(f"load average {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    return 0
