"""What abusive HTTP clients do to ``bridge-store serve``: the figures in docs/connect.md.

``python -m bench http-limits`` starts ``bridge-store serve --store memory://`` (a
fresh process per probe) and measures:

- ``endless-header``: one connection sends a header that never ends, as fast as it
  can, for ``--seconds``; meanwhile one keep-alive client makes calls. Bytes the
  server took, whether and when it closed the connection, the other client's p50/p99,
  and the server's RSS before and at its peak.
- ``big-head``: the status of one request with a 1 MiB header, and of one with 5,000
  small headers.
- ``idle``: ``--connections`` connections that send nothing; how many the server has
  closed after ``--seconds``, and when the last one closed.
- ``slowloris``: 200 connections that send a request head one byte a second.
- ``fd-limit``: the server started with its soft open-file limit at 1024 (``hard``
  unchanged, then also 1024), 1,124 idle connections, then 39 calls: served, refused
  promptly (an HTTP answer), or failed (timeout, reset).

Timing figures depend on the machine: report the load average with them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.config import READY_PREFIX

CALL_BODY = json.dumps({"substore": "agents", "method": "get", "input": {"agentId": "a"}}).encode()
START_TIMEOUT_SECONDS = 30.0
CALL_TIMEOUT_SECONDS = 2.0


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    token: str

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


@contextlib.contextmanager
def serving(nofile: tuple[int, int] | None = None) -> Iterator[Served]:
    """``bridge-store serve --store memory://`` on a free port, optionally with RLIMIT_NOFILE."""
    token = secrets.token_urlsafe(32)

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", "--store", "memory://"],
        env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit,  # only setrlimit, before exec
    )
    assert process.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    port = 0
    while time.monotonic() < deadline:
        line = process.stderr.readline().decode()
        if line.startswith(READY_PREFIX):
            port = int(json.loads(line[len(READY_PREFIX) :])["url"].rsplit(":", 1)[1].strip("/"))
            break
        if not line and process.poll() is not None:
            break
    if not port:
        process.kill()
        raise RuntimeError("bridge-store serve did not start")
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    try:
        yield Served(process, port, token)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def call(connection: http.client.HTTPConnection, token: str) -> int:
    connection.request(
        "POST",
        CALL_STORE_PATH,
        CALL_BODY,
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    response.read()
    return response.status


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


def endless_header(seconds: float) -> dict[str, Any]:
    with serving() as server:
        rss_before = server.rss_mib()
        stop = threading.Event()
        latencies: list[float] = []
        failures: list[str] = []

        def normal_client() -> None:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    call(connection, server.token)
                except (OSError, http.client.HTTPException) as error:
                    failures.append(type(error).__name__)
                    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                    continue
                latencies.append(time.perf_counter() - started)

        client = threading.Thread(target=normal_client)
        client.start()
        sent = 0
        closed: list[float] = []
        peak = rss_before
        chunk = b"a" * 65536
        started = time.monotonic()
        last_sample = started
        while time.monotonic() - started < seconds:
            # The same attack again each time the server closes the connection.
            attacker = socket.create_connection(("127.0.0.1", server.port))
            try:
                attacker.sendall(b"POST " + CALL_STORE_PATH.encode() + b" HTTP/1.1\r\nX-Endless: ")
                while time.monotonic() - started < seconds:
                    attacker.sendall(chunk)
                    sent += len(chunk)
                    if time.monotonic() - last_sample > 0.2:
                        peak = max(peak, server.rss_mib())
                        last_sample = time.monotonic()
            except OSError:
                closed.append(time.monotonic() - started)
            finally:
                attacker.close()
        peak = max(peak, server.rss_mib())
        stop.set()
        client.join()
        return {
            "seconds": seconds,
            "header_bytes_sent": sent,
            "closed_by_server": len(closed),
            "first_closed_after_s": round(closed[0], 3) if closed else None,
            "other_client_calls": len(latencies),
            "other_client_failures": len(failures),
            "other_client_p50_ms": round(statistics.median(latencies) * 1000, 2)
            if latencies
            else None,
            "other_client_p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
            "rss_mib_before": round(rss_before, 1),
            "rss_mib_peak": round(peak, 1),
        }


def raw_status(port: int, head: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(head)
            answer = sock.recv(200)
        except OSError as error:
            return type(error).__name__
    return answer.split(b"\r\n", 1)[0].decode("latin-1") if answer else "closed"


def big_head() -> dict[str, Any]:
    with serving() as server:
        auth = f"Authorization: Bearer {server.token}\r\n".encode()
        start = b"POST " + CALL_STORE_PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n" + auth
        tail = b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(CALL_BODY)
        one_mib = start + b"X-Big: " + b"a" * (1 << 20) + b"\r\n" + tail + CALL_BODY
        many = start + b"".join(b"X-%d: v\r\n" % i for i in range(5000)) + tail + CALL_BODY
        return {
            "one_1_mib_header": raw_status(server.port, one_mib),
            "5000_headers": raw_status(server.port, many),
        }


async def _hold(port: int, count: int, seconds: float, trickle: bool) -> dict[str, Any]:
    """Open ``count`` connections; report how many the server closed within ``seconds``."""
    started = time.monotonic()
    closed_at: list[float] = []
    head = b"POST " + CALL_STORE_PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Slow: "

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return
        try:
            async with asyncio.timeout(seconds - (time.monotonic() - started)):
                if trickle:
                    for byte in head + b"a" * 10_000:
                        writer.write(bytes([byte]))
                        if await _closed_within(reader, 1.0):
                            break
                else:
                    await reader.read()
            closed_at.append(time.monotonic() - started)
        except (TimeoutError, OSError):
            pass
        finally:
            writer.close()

    await asyncio.gather(*(one() for _ in range(count)))
    return {
        "connections": count,
        "seconds": seconds,
        "closed_by_server": len(closed_at),
        "last_closed_after_s": round(max(closed_at), 1) if closed_at else None,
    }


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), seconds)
    except TimeoutError:
        return False
    return True if not data else await _drained(reader)


async def _drained(reader: asyncio.StreamReader) -> bool:
    await reader.read()
    return True


def idle(connections: int, seconds: float) -> dict[str, Any]:
    with serving() as server:
        return asyncio.run(_hold(server.port, connections, seconds, trickle=False))


def slowloris(seconds: float) -> dict[str, Any]:
    with serving() as server:
        return asyncio.run(_hold(server.port, 200, seconds, trickle=True))


def fd_limit(
    nofile: tuple[int, int], idle_connections: int = 1124, calls: int = 39
) -> dict[str, Any]:
    with serving(nofile) as server:
        limits = Path(f"/proc/{server.process.pid}/limits").read_text()
        soft = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        held: list[socket.socket] = []
        for _ in range(idle_connections):
            with contextlib.suppress(OSError):
                held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        outcomes: dict[str, int] = {}
        for _ in range(calls):
            connection = http.client.HTTPConnection(
                "127.0.0.1", server.port, timeout=CALL_TIMEOUT_SECONDS
            )
            try:
                status = call(connection, server.token)
                key = "served" if status == 200 else f"refused {status}"
            except (OSError, http.client.HTTPException) as error:
                key = f"failed ({type(error).__name__})"
            finally:
                connection.close()
            outcomes[key] = outcomes.get(key, 0) + 1
        for sock in held:
            sock.close()
        return {
            "rlimit_nofile_given": list(nofile),
            "server_limits_line": " ".join(soft.split()),
            "idle_connections_opened": len(held),
            "calls": outcomes,
        }


PROBES: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "endless-header": lambda a: endless_header(a.seconds),
    "big-head": lambda a: big_head(),
    "idle": lambda a: idle(a.connections, a.seconds),
    "slowloris": lambda a: slowloris(a.seconds),
    "fd-limit": lambda a: {
        "hard_unchanged": fd_limit((1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1])),
        "hard_1024": fd_limit((1024, 1024)),
    },
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench http-limits", description=__doc__)
    parser.add_argument("probes", nargs="*", metavar="PROBE", help=", ".join(PROBES))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=2000)
    args = parser.parse_args(argv)
    unknown = set(args.probes) - set(PROBES)
    if unknown:
        parser.error(f"unknown probes {sorted(unknown)}; choose from {', '.join(PROBES)}")
    print(json.dumps({"load_average": os.getloadavg()}))
    for name in args.probes or list(PROBES):
        print(json.dumps({name: PROBES[name](args)}), flush=True)
    print(json.dumps({"load_average": os.getloadavg()}))
    return 0
