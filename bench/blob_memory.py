"""Peak RSS of ``bridge-store serve`` while one big checkpoint blob goes in and out.

    python -m bench blob-memory [--mib 64] [--backends memory,sqlite,postgres,redis,s3]

For each backend a fresh ``bridge-store serve`` child gets ``checkpoints.create``
with a ``--mib`` MiB blob, base64 inside JSON as the bridge sends it, then
``checkpoints.get`` of it. Before each call the child's peak RSS is reset (Linux:
``5`` into ``/proc/PID/clear_refs``) and its RSS read as the baseline; after the call
``VmHWM`` is its peak. Reported per call: peak minus baseline and the peak itself, in
MiB and as multiples of the blob (the target is a peak increase under 4x). A small
blob goes through first, so lazy imports and connections are not counted.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.scaling_targets import make_target
from bridge_store.client import start_sidecar
from bridge_store.connect import CALL_STORE_PATH

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
        self._url = url.rstrip("/") + CALL_STORE_PATH
        self._pid = pid
        self._http = httpx.Client(
            timeout=300.0,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "Connect-Protocol-Version": "1",
            },
        )

    def call(self, body: bytes) -> bytes:
        response = self._http.post(self._url, content=body)
        if response.status_code != 200:
            raise RuntimeError(f"CallStore answered {response.status_code}: {response.text[:200]}")
        return response.content

    def measured(self, body: bytes) -> tuple[bytes, Peak]:
        reset_peak(self._pid)
        baseline = status_kib(self._pid, "VmRSS")
        answer = self.call(body)
        peak = status_kib(self._pid, "VmHWM")
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


def measure(backend: str, blob: bytes, rounds: int) -> tuple[list[Peak], list[Peak]]:
    creates: list[Peak] = []
    gets: list[Peak] = []
    target = make_target(backend, 0)
    try:
        with start_sidecar(target.url) as sidecar:
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
            finally:
                store.close()
    finally:
        target.cleanup()
    return creates, gets


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench blob-memory", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--mib", type=int, default=64, help="blob size in MiB")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=3, help="create + get pairs per backend")
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
    for backend in args.backends.split(","):
        creates, gets = measure(backend, blob, args.rounds)
        for call, peaks in (("create", creates), ("get", gets)):
            baseline = statistics.median(p.baseline_mib for p in peaks)
            peak = statistics.median(p.peak_mib for p in peaks)
            growth = statistics.median(p.growth_mib for p in peaks)
            print(
                f"{backend:9s} {call:7s} {baseline:13.1f} {peak:9.1f} {growth:14.1f} "
                f"{growth / args.mib:9.2f} {peak / args.mib:7.2f}",
                flush=True,
            )
    return 0
