"""The real bridge, end to end: bridge-store against the bridge's built-in SQLite store.

    python -m bench e2e [--turns 20] [--rounds 5] [--store URL]

Each run starts a fresh ``cursor-sdk-bridge`` (private HOME and state directory) with
the stand-in Cursor API (testkit/cursor_api.py), then times one
``agents.create`` and ``--turns`` short turns, ``agent.send(...).wait()``: the
stand-in refuses RunSSE, so each turn ends at once with status ``error`` after its run
row and run events went through the store. That is the store's share of a turn with
as little else in it as the real bridge allows.

- ``bridge-store``: ``bridge-store serve`` (``--store``, by default a fresh SQLite file)
  via ``start_sidecar`` and the bridge via ``launch_bridge`` (``--local-store
  '{"type":"custom"}'``).
- ``builtin``: the bridge with no store flags and agents with no ``local.store``: its
  own SQLite store under its state directory (``{"type": "sqlite"}`` means the same).

Runs alternate (ours, builtin, ours, ...) so drift on a shared machine hits both; the
report gives per-run totals and per-turn medians. Bridge and server start-up is not
timed.

Where a bridge-store turn's extra time goes: the server's own time per call, from a
request's headers to its answer (its ``bridge_store_call_duration_seconds`` histogram,
read from ``GET /metrics`` before and after the turns), summed over a turn's calls,
against the turn's extra time over the built-in store (mean turn minus mean turn).
The rest of the extra is the bridge's callback client (its Connect client, Node's
HTTP stack) and loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.client import bridge_path, launch_bridge, local_options, start_sidecar
from bridge_store.server.app import METRICS_PATH
from testkit.cursor_api import MODEL_ID, CursorApiStub

API_KEY = "bench-api-key"
READY_PREFIX = "cursor-sdk-bridge ready "
START_TIMEOUT_SECONDS = 60.0
#: A follow-up send is refused while the agent's stored run is still active; the
#: bridge clears it a moment after wait() returns.
BUSY_RETRY_SECONDS = 0.005
BUSY_TIMEOUT_SECONDS = 30.0
KINDS = ("bridge-store", "builtin")
#: The histogram of the server's time per CallStore call (bridge_store/ops/metrics.py).
CALL_DURATION = "bridge_store_call_duration_seconds"
#: Wait after the last turn so calls the bridge makes just after it are counted.
SETTLE_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class ServerTime:
    """The store server's own time over the turns: calls answered, seconds spent."""

    calls: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Timing:
    kind: str
    create_ms: float
    turn_ms: list[float]
    busy_retries: int
    #: bridge-store only: what the server's histogram counted during the turns.
    server: ServerTime | None = None

    @property
    def total_ms(self) -> float:
        return self.create_ms + sum(self.turn_ms)


class StoreMetrics:
    """Reads the CallStore call-duration histogram of a bridge-store server."""

    def __init__(self, url: str, token: str) -> None:
        self._url = url.rstrip("/") + METRICS_PATH
        self._token = token

    def read(self) -> ServerTime:
        response = httpx.get(
            self._url, headers={"Authorization": f"Bearer {self._token}"}, timeout=30
        )
        response.raise_for_status()
        calls, seconds = 0.0, 0.0
        for family in text_string_to_metric_families(response.text):
            if family.name != CALL_DURATION:
                continue
            for sample in family.samples:
                if sample.name == CALL_DURATION + "_count":
                    calls += sample.value
                elif sample.name == CALL_DURATION + "_sum":
                    seconds += sample.value
        return ServerTime(int(calls), seconds)


class _Drain:
    """Reads a child's stderr to its end so the child never blocks; keeps the ready line."""

    def __init__(self, stream: IO[str]) -> None:
        self.ready = threading.Event()
        self.ready_line = ""
        self.tail: list[str] = []
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: IO[str]) -> None:
        for line in stream:
            self.tail = [*self.tail[-50:], line]
            if not self.ready_line and line.startswith(READY_PREFIX):
                self.ready_line = line
                self.ready.set()
        self.ready.set()

    def join(self) -> None:
        self._thread.join(10)


@contextlib.contextmanager
def builtin_bridge(workspace: Path, state_root: Path, env: dict[str, str]) -> Iterator[Any]:
    """The bridge with its own SQLite store, launched like ``launch_bridge`` minus the
    store flags; yields a ``cursor_sdk.Client``."""
    import cursor_sdk

    argv = [bridge_path(), "--workspace", str(workspace), "--state-root", str(state_root)]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env={**os.environ, **env},
        start_new_session=True,
    )
    assert process.stderr is not None
    drain = _Drain(process.stderr)
    try:
        drain.ready.wait(START_TIMEOUT_SECONDS)
        if not drain.ready_line:
            raise RuntimeError("cursor-sdk-bridge did not start:\n" + "".join(drain.tail))
        endpoint = cursor_sdk.BridgeEndpoint.from_discovery(
            json.loads(drain.ready_line[len(READY_PREFIX) :])
        )
        with cursor_sdk.Client(
            base_url=endpoint.url, auth_token=endpoint.auth_token, allow_api_key_env_fallback=True
        ) as client:
            yield client
    finally:
        # The launcher is a shell script running Node: stop the whole group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        drain.join()


@contextlib.contextmanager
def store_bridge(
    store: str, workspace: Path, state_root: Path, env: dict[str, str]
) -> Iterator[tuple[Any, StoreMetrics]]:
    """bridge-store serving ``store`` and the bridge on it; yields a ``cursor_sdk.Client``
    and the server's metrics."""
    with (
        start_sidecar(store) as sidecar,
        launch_bridge(
            sidecar.url, sidecar.auth_token, workspace=workspace, state_root=state_root, env=env
        ) as bridge,
        bridge.client() as client,
    ):
        yield client, StoreMetrics(sidecar.url, sidecar.auth_token)


def is_busy(error: Exception) -> bool:
    """The bridge's refusal of a send while the agent's previous run is still active."""
    text = str(error).lower()
    return "active run" in text or "already running" in text or "busy" in text


def drive(
    client: Any,
    kind: str,
    local: dict[str, Any],
    turns: int,
    metrics: StoreMetrics | None = None,
) -> Timing:
    options = {"model": MODEL_ID, "api_key": API_KEY, "local": local}
    started = time.perf_counter()
    agent = client.agents.create(options)
    create_ms = (time.perf_counter() - started) * 1000
    before = metrics.read() if metrics is not None else None
    turn_ms: list[float] = []
    retries = 0
    for turn in range(turns):
        started = time.perf_counter()
        deadline = started + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                result = agent.send(f"turn {turn}").wait()
                break
            except Exception as error:
                if not is_busy(error) or time.perf_counter() > deadline:
                    raise
                retries += 1
                time.sleep(BUSY_RETRY_SECONDS)
        turn_ms.append((time.perf_counter() - started) * 1000)
        if result.status != "error":
            raise RuntimeError(f"turn {turn} ended {result.status!r}, expected 'error'")
    server = None
    if metrics is not None and before is not None:
        # The bridge finishes a turn's last calls a moment after wait() returns.
        time.sleep(SETTLE_SECONDS)
        after = metrics.read()
        server = ServerTime(after.calls - before.calls, after.seconds - before.seconds)
    return Timing(kind, create_ms, turn_ms, retries, server)


def run_once(kind: str, store: str | None, turns: int, api_url: str) -> Timing:
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        root = Path(tmp)
        workspace, home, state = root / "project", root / "home", root / "state"
        workspace.mkdir()
        home.mkdir()
        env = {"CURSOR_BACKEND_URL": api_url, "HOME": str(home)}
        if kind == "builtin":
            with builtin_bridge(workspace, state, env) as client:
                return drive(client, kind, {"cwd": str(workspace)}, turns)
        url = store or f"sqlite:///{root / 'store.db'}"
        with store_bridge(url, workspace, state, env) as (client, metrics):
            return drive(client, kind, local_options(workspace), turns, metrics)


def summarize(timings: Sequence[Timing]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        mine = [t for t in timings if t.kind == kind]
        if not mine:
            continue
        turns = [ms for t in mine for ms in t.turn_ms]
        summary[kind] = {
            "total_ms": statistics.median(t.total_ms for t in mine),
            "create_ms": statistics.median(t.create_ms for t in mine),
            "turn_ms": statistics.median(turns),
            "mean_turn_ms": statistics.fmean(turns),
            "busy_retries": statistics.median(t.busy_retries for t in mine),
        }
        servers = [t.server for t in mine if t.server is not None]
        if servers:
            count = sum(len(t.turn_ms) for t in mine if t.server is not None)
            summary[kind]["server_calls_per_turn"] = sum(s.calls for s in servers) / count
            summary[kind]["server_ms_per_turn"] = sum(s.seconds for s in servers) * 1000 / count
    if len(summary) == len(KINDS):
        ours, builtin = summary["bridge-store"], summary["builtin"]
        extra = ours["mean_turn_ms"] - builtin["mean_turn_ms"]
        ours["extra_ms_per_turn"] = extra
        if "server_ms_per_turn" in ours and extra > 0:
            ours["server_share_of_extra"] = ours["server_ms_per_turn"] / extra
            ours["client_ms_per_turn"] = extra - ours["server_ms_per_turn"]
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench e2e", description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="short turns per run")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each store")
    parser.add_argument("--store", help="bridge-store URL (default: a fresh SQLite file per run)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    timings: list[Timing] = []
    with CursorApiStub() as api:
        for round_ in range(args.rounds):
            for kind in KINDS:
                timing = run_once(kind, args.store, args.turns, api.url)
                timings.append(timing)
                print(
                    f"round {round_ + 1} {kind:12s} total {timing.total_ms:8.1f} ms  "
                    f"create {timing.create_ms:6.1f} ms  "
                    f"turn p50 {statistics.median(timing.turn_ms):6.1f} ms  "
                    f"busy retries {timing.busy_retries}",
                    file=sys.stderr,
                )
    summary = summarize(timings)
    if args.json:
        print(json.dumps({"turns": args.turns, "rounds": args.rounds, "summary": summary}))
        return 0
    print(f"\n{args.turns} turns, median of {args.rounds} runs each")
    print(f"{'store':14s} {'total ms':>9s} {'create ms':>10s} {'per turn ms':>12s}")
    for kind, row in summary.items():
        print(f"{kind:14s} {row['total_ms']:9.1f} {row['create_ms']:10.1f} {row['turn_ms']:12.1f}")
    if len(summary) == len(KINDS):
        ours = summary["bridge-store"]
        ratio = ours["total_ms"] / summary["builtin"]["total_ms"]
        print(f"bridge-store / builtin total: {ratio:.2f}x")
        if "server_share_of_extra" in ours:
            print(
                f"per turn (means): {ours['extra_ms_per_turn']:.1f} ms extra over builtin; "
                f"server {ours['server_ms_per_turn']:.1f} ms over "
                f"{ours['server_calls_per_turn']:.1f} calls "
                f"({ours['server_share_of_extra']:.0%} of the extra), the bridge's "
                f"callback client and loopback {ours['client_ms_per_turn']:.1f} ms"
            )
    return 0
