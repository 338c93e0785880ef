"""Protocol overhead of CallStore: hand-written ``bridge_store.connect`` vs ``connectrpc``.

Each implementation is served by the same uvicorn (one process, asyncio, h11, no
access log, as ``bridge-store serve`` runs by default) over the memory backend, so
what differs is only the protocol layer. Load comes from ``wrk`` in a second process
over loopback, closed-loop with a fixed number of connections (bounded load), sending
the headers the bridge sends (connect-node: JSON, ``Accept-Encoding: gzip, br``):

- ``append``: ``runEvents.append`` with the largest event of the recorded bridge
  traffic (~1 KB JSON body), the hot path while an agent streams;
- ``get``: ``agents.get`` of an existing agent (~100 B body, ~400 B answer);
- ``append-proto``: the append as binary protobuf.

Needs wrk (``apt-get install -y wrk``). Run from the repository root::

    python bench/connect_overhead.py --duration 10 --connections 1 16

Prints one markdown table row per (implementation, scenario, connections): the
median of ``--rounds`` runs, taken in turns across implementations. Implementations:
``ours`` (``bridge_store.app``), ``connectrpc`` (its google.protobuf codecs) and
``connectrpc+our-codecs`` (connectrpc's server with bridge-store's codecs plugged in);
see ``bench/connect_connectrpc_app.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `serve` imports bench.connect_connectrpc_app

from bridge_store.connect import CALL_STORE_PATH  # noqa: E402

TOKEN = "bench-token"  # noqa: S105 - a throwaway token for a loopback benchmark
FIXTURE = Path("/work/shared/fixtures/bridge-traffic.jsonl")
IMPLEMENTATIONS = ("ours", "connectrpc", "connectrpc+our-codecs")
SCENARIOS = ("append", "get", "append-proto")
AGENT = {
    "agentId": "agent-bench",
    "cwd": "/home/user/project",
    "status": "idle",
    "activeRunId": None,
    "name": "bench",
    "createdAt": 1795994234137,
    "updatedAt": 1795994234140,
    "sdkMetadata": {"blobEncryptionKey": "a5" * 32},
}
# The largest runEvents.append of the recording, inlined in case the fixture is absent.
FALLBACK_EVENT = {
    "runId": "run-8b8b23f4-a981-4f17-aded-4a5a61d44833",
    "eventType": "run_stream_event",
    "payload": {
        "schemaVersion": 1,
        "type": "sdk_message",
        "agentId": "agent-32faf2c2-550d-460d-a73c-a14aef145273",
        "runId": "run-8b8b23f4-a981-4f17-aded-4a5a61d44833",
        "message": {
            "type": "status",
            "agent_id": "agent-32faf2c2-550d-460d-a73c-a14aef145273",
            "run_id": "run-8b8b23f4-a981-4f17-aded-4a5a61d44833",
            "status": "ERROR",
            "message": "[permission_denied] HTTP 403 " + "x" * 500,
        },
    },
}

WRK_SCRIPT = """
wrk.method = "POST"
local file = io.open("{body}", "rb")
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "{content_type}"
wrk.headers["Connect-Protocol-Version"] = "1"
wrk.headers["Authorization"] = "Bearer {token}"
wrk.headers["Accept-Encoding"] = "gzip, br"
"""


def largest_append() -> dict[str, Any]:
    if not FIXTURE.exists():
        return FALLBACK_EVENT
    appends = [
        line["input"]
        for line in map(json.loads, FIXTURE.read_text().splitlines())
        if line.get("substore") == "runEvents" and line.get("method") == "append"
    ]
    event: dict[str, Any] = max(appends, key=lambda item: len(json.dumps(item)))
    return event


def scenario_request(scenario: str) -> tuple[str, bytes]:
    """(content type, body) of one request of ``scenario``."""
    if scenario == "get":
        call = {"substore": "agents", "method": "get", "input": {"agentId": AGENT["agentId"]}}
        return "application/json", json.dumps(call).encode()
    event = largest_append()
    if scenario == "append":
        call = {"substore": "runEvents", "method": "append", "input": event}
        return "application/json", json.dumps(call).encode()
    from bridge_store._generated.sdk.v1.sdk_store_callback_service_pb2 import CallStoreRequest

    request = CallStoreRequest(substore="runEvents", method="append")
    request.input.update(event)
    return "application/proto", request.SerializeToString()


# -- the server process ---------------------------------------------------------------


def serve(impl: str, port: int) -> None:
    import uvicorn

    from bridge_store.config import ServerConfig
    from bridge_store.stores import Routes

    config = ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN)
    if impl == "ours":
        from bridge_store.app import create_app

        app: Any = create_app(config)
    else:
        from bench.connect_connectrpc_app import create_connectrpc_app

        app = create_connectrpc_app(config, our_codecs=impl.endswith("our-codecs"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(impl: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "serve", "--impl", impl, "--port", str(port)], cwd=ROOT
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.post(base_url + CALL_STORE_PATH, timeout=1.0)
            return process, base_url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{impl} server did not start")


def seed(base_url: str) -> None:
    response = httpx.post(
        base_url + CALL_STORE_PATH,
        json={"substore": "agents", "method": "create", "input": {"agent": AGENT}},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    response.raise_for_status()
    # Both servers must answer the scenarios the same way before they are timed.
    for scenario in SCENARIOS:
        content_type, body = scenario_request(scenario)
        answer = httpx.post(
            base_url + CALL_STORE_PATH,
            content=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type},
        )
        answer.raise_for_status()
        if scenario == "get":
            assert answer.json() == {"output": AGENT}, answer.text


def clear_events(base_url: str) -> None:
    """Drop appended events between runs, so every run starts with the same heap."""
    httpx.post(
        base_url + CALL_STORE_PATH,
        json={"substore": "runEvents", "method": "delete", "input": {"filter": {}}},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    ).raise_for_status()


# -- the load generator ---------------------------------------------------------------


@dataclass
class Result:
    requests_per_second: float
    latency_ms: dict[str, float]
    errors: int


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS_MS[unit]


def run_wrk(url: str, script: Path, connections: int, duration: int) -> Result:
    output = subprocess.run(
        [
            "wrk",
            "--threads",
            "1",
            "--connections",
            str(connections),
            "--duration",
            f"{duration}s",
            "--latency",
            "--script",
            str(script),
            url,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    latency = {
        f"p{pct}": _ms(value) for pct, value in re.findall(r"^\s+(\d+)%\s+(\S+)$", output, re.M)
    }
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    failed = re.search(r"Socket errors: .*", output)
    errors = int(bad.group(1)) if bad else 0
    if failed:
        errors += sum(int(n) for n in re.findall(r"\d+", failed.group(0)))
    return Result(rps, latency, errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    serve_parser = commands.add_parser("serve", help="(internal) run one server")
    serve_parser.add_argument("--impl", choices=IMPLEMENTATIONS, required=True)
    serve_parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--impl", nargs="+", choices=IMPLEMENTATIONS, default=IMPLEMENTATIONS)
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=SCENARIOS)
    parser.add_argument("--connections", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds before each run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per case (median shown)")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.impl, args.port)
        return
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found: apt-get install -y wrk")

    servers = {impl: start_server(impl) for impl in args.impl}
    try:
        for _, base_url in servers.values():
            seed(base_url)
        print(f"load average before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
        print(
            "| implementation | scenario | connections | req/s | p50 ms | p90 ms | p99 ms "
            "| errors |"
        )
        print("|---|---|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            for scenario in args.scenario:
                script = write_script(Path(tmp), scenario)
                for connections in args.connections:
                    # Rounds alternate between the implementations, so a load change on
                    # the machine hits all of them alike; medians are reported.
                    results: dict[str, list[Result]] = {impl: [] for impl in servers}
                    for _ in range(args.rounds):
                        for impl, (_, base_url) in servers.items():
                            url = base_url + CALL_STORE_PATH
                            run_wrk(url, script, connections, args.warmup)
                            clear_events(base_url)
                            results[impl].append(run_wrk(url, script, connections, args.duration))
                            clear_events(base_url)
                    for impl, runs in results.items():
                        print(format_row(impl, scenario, connections, runs), flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def write_script(directory: Path, scenario: str) -> Path:
    content_type, body = scenario_request(scenario)
    body_file = directory / f"{scenario}.body"
    body_file.write_bytes(body)
    script = directory / f"{scenario}.lua"
    script.write_text(WRK_SCRIPT.format(body=body_file, content_type=content_type, token=TOKEN))
    return script


def format_row(impl: str, scenario: str, connections: int, runs: list[Result]) -> str:
    rps = statistics.median(run.requests_per_second for run in runs)
    latency = {
        key: statistics.median(run.latency_ms[key] for run in runs) for key in ("p50", "p90", "p99")
    }
    errors = sum(run.errors for run in runs)
    return (
        f"| {impl} | {scenario} | {connections} | {rps:.0f} | {latency['p50']:.2f} "
        f"| {latency['p90']:.2f} | {latency['p99']:.2f} | {errors} |"
    )


if __name__ == "__main__":
    main()
