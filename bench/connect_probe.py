"""Behaviour differences between the CallStore implementations, on edge cases.

Starts each implementation of ``bench/connect_overhead.py`` (same uvicorn, memory
backend) and sends the same edge-case requests to each, printing what came back as a
markdown table. The companion of the overhead numbers in ``docs/connect.md``: speed
only matters among implementations that behave correctly.

    python bench/connect_probe.py
"""

from __future__ import annotations

import json
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.connect_overhead import AGENT, IMPLEMENTATIONS, TOKEN, start_server
from bridge_store.connect import CALL_STORE_PATH

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def post(base_url: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        base_url + CALL_STORE_PATH, content=content, headers={**AUTH, **headers}, timeout=10
    )


def outcome(response: httpx.Response) -> str:
    if response.status_code == 200:
        return "200"
    try:
        return f"{response.status_code} {response.json()['code']}"
    except (ValueError, KeyError):
        return str(response.status_code)


def append(base_url: str, payload: Any) -> httpx.Response:
    event = {"runId": "probe", "eventType": "probe", "payload": payload}
    return post(base_url, {"substore": "runEvents", "method": "append", "input": event})


def integers_stay_integers(base_url: str) -> str:
    text = post(
        base_url, {"substore": "agents", "method": "get", "input": {"agentId": AGENT["agentId"]}}
    ).text
    return "int" if "1795994234137.0" not in text else "float (`1795994234137.0`)"


def big_integer(base_url: str) -> str:
    big = 2**53 + 1
    response = append(base_url, {"n": big})
    if response.status_code != 200:
        return outcome(response)
    returned = response.json()["output"]["payload"]["n"]
    return "exact" if returned == big else f"changed to {returned!r}"


def nesting(depth: int) -> Callable[[str], str]:
    def probe(base_url: str) -> str:
        value: Any = {}
        for _ in range(depth - 1):
            value = {"a": value}
        return outcome(append(base_url, value))

    return probe


def lone_surrogate(base_url: str) -> str:
    body = b'{"substore":"runEvents","method":"append","input":{"runId":"probe",'
    body += b'"eventType":"probe","payload":"cut \\ud83d"}}'
    response = post(base_url, body)
    return outcome(response)


def nan_literal(base_url: str) -> str:
    body = b'{"substore":"runEvents","method":"append","input":{"runId":"probe",'
    body += b'"eventType":"probe","payload":NaN}}'
    return outcome(post(base_url, body))


def huge_declared_length(base_url: str) -> str:
    parts = urlsplit(base_url)
    head = (
        f"POST {CALL_STORE_PATH} HTTP/1.1\r\nHost: probe\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n"
    ).encode()
    assert parts.hostname is not None
    assert parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=3) as sock:
        sock.sendall(head)
        try:
            answer = sock.recv(200)
        except TimeoutError:
            return "no answer within 3 s (waits for the body)"
    return answer.split(b"\r\n", 1)[0].decode()


def empty_response_encoding(base_url: str) -> str:
    call = json.dumps({"substore": "agents", "method": "get", "input": {"agentId": "nobody"}})
    headers = {**AUTH, "Accept-Encoding": "gzip, br"}
    with httpx.stream(
        "POST", base_url + CALL_STORE_PATH, content=call.encode(), headers=headers
    ) as response:
        size = sum(len(chunk) for chunk in response.iter_raw())
        encoding = response.headers.get("content-encoding", "identity")
    return f"{encoding}, {size} B on the wire"


def weighted_accept_encoding(base_url: str) -> str:
    append(base_url, "x" * 4000)
    response = post(
        base_url,
        {"substore": "runEvents", "method": "list", "input": {"runId": "probe"}},
        **{"Accept-Encoding": "gzip;q=0.5"},
    )
    encoding: str = response.headers.get("content-encoding", "identity")
    return encoding


def latin1_charset(base_url: str) -> str:
    call = {"substore": "agents", "method": "get", "input": {"agentId": "x"}}
    return outcome(post(base_url, call, **{"Content-Type": "application/json; charset=latin-1"}))


def brotli_request(base_url: str) -> str:
    return outcome(post(base_url, b"{}", **{"Content-Encoding": "br"}))


def missing_token(base_url: str) -> str:
    headers = {"Content-Type": "application/json"}
    return outcome(httpx.post(base_url + CALL_STORE_PATH, content=b"{}", headers=headers))


PROBES: list[tuple[str, Callable[[str], str]]] = [
    ("JSON integer read back (`createdAt`)", integers_stay_integers),
    ("JSON integer 2^53+1 in a payload", big_integer),
    ("payload nested 40 levels", nesting(40)),
    ("payload nested 100 levels", nesting(100)),
    ("lone surrogate `\\ud83d` in a JSON string", lone_surrogate),
    ("JSON `NaN` literal", nan_literal),
    ("`Content-Length: 10^12`, body never sent", huge_declared_length),
    ("null result, `Accept-Encoding: gzip, br`", empty_response_encoding),
    ("large result, `Accept-Encoding: gzip;q=0.5`", weighted_accept_encoding),
    ("`Content-Type: application/json; charset=latin-1`", latin1_charset),
    ("`Content-Encoding: br` request", brotli_request),
    ("no `Authorization`", missing_token),
]


def main() -> None:
    servers = {impl: start_server(impl) for impl in IMPLEMENTATIONS}
    try:
        for _, base_url in servers.values():
            response = post(
                base_url, {"substore": "agents", "method": "create", "input": {"agent": AGENT}}
            )
            response.raise_for_status()
        print("| case | " + " | ".join(servers) + " |")
        print("|---" * (len(servers) + 1) + "|")
        for name, probe in PROBES:
            answers = [probe(base_url) for _, base_url in servers.values()]
            print(f"| {name} | " + " | ".join(answers) + " |", flush=True)
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
