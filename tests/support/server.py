"""Run ``bridge-store serve`` as a real subprocess and talk CallStore to it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from bridge_store.errors import Code, ConnectError

CALL_STORE_PATH = "sdk.v1.SdkStoreCallbackService/CallStore"
READY_PREFIX = "bridge-store ready "
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0


class StoreHttpClient:
    """A CallStore client over its own HTTP connection (one per thread under load)."""

    def __init__(self, url: str, token: str) -> None:
        self._url = url + CALL_STORE_PATH
        self._http = httpx.Client(
            timeout=60.0,
            headers={"Authorization": f"Bearer {token}", "Connect-Protocol-Version": "1"},
        )

    def call(self, substore: str, method: str, data: Any) -> Any:
        """One JSON CallStore call; returns the output or raises ConnectError."""
        response = self._http.post(
            self._url, json={"substore": substore, "method": method, "input": data}
        )
        body = response.json()
        if response.status_code != 200:
            raise ConnectError(Code(body["code"]), body.get("message", ""))
        return body.get("output")

    def list_all(self, substore: str, filter_: dict[str, Any]) -> list[Any]:
        """Every item of a list, following nextCursor."""
        items: list[Any] = []
        cursor = None
        while True:
            page_filter = {**filter_, **({"cursor": cursor} if cursor else {})}
            page = self.call(substore, "list", {"filter": page_filter})
            items.extend(page["items"])
            cursor = page.get("nextCursor")
            if cursor is None:
                return items

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """A run's whole event log, following nextOffset."""
        events: list[dict[str, Any]] = []
        offset = "0"
        while True:
            page = self.call("runEvents", "list", {"runId": run_id, "afterOffset": offset})
            events.extend(page["items"])
            if "nextOffset" not in page:
                return events
            offset = page["nextOffset"]

    def close(self) -> None:
        self._http.close()


@dataclass
class ServerProcess:
    """A running ``bridge-store serve`` subprocess."""

    process: subprocess.Popen[str]
    url: str
    token: str
    ready: dict[str, Any]
    stderr_lines: list[str] = field(default_factory=list)
    drain: threading.Thread | None = None
    client: StoreHttpClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = StoreHttpClient(self.url, self.token)

    def call(self, substore: str, method: str, data: Any) -> Any:
        """One JSON CallStore call; returns the output or raises ConnectError."""
        return self.client.call(substore, method, data)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """A run's whole event log."""
        return self.client.events(run_id)

    def new_client(self) -> StoreHttpClient:
        """A client with a connection of its own, e.g. for another thread."""
        return StoreHttpClient(self.url, self.token)

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                "bridge-store serve did not stop on SIGTERM:\n" + "".join(self.stderr_lines)
            ) from None
        finally:
            if self.drain is not None:
                self.drain.join(STOP_TIMEOUT_SECONDS)
            if self.process.stderr is not None:
                self.process.stderr.close()


def start_server(
    *args: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
    cwd: str | None = None,
) -> ServerProcess:
    """Start ``bridge-store serve --port 0 *args`` and wait for its ready line."""
    token = token or secrets.token_urlsafe(24)
    process_env = {**os.environ, **(env or {}), "BRIDGE_STORE_AUTH_TOKEN": token}
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env,
        cwd=cwd,
    )
    lines: list[str] = []
    ready_seen = threading.Event()

    def drain() -> None:
        # Keep reading for the whole life of the process so a chatty server never
        # blocks on a full pipe.
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith(READY_PREFIX):
                ready_seen.set()
        ready_seen.set()

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    ready_seen.wait(START_TIMEOUT_SECONDS)
    ready_line = next((line for line in lines if line.startswith(READY_PREFIX)), None)
    if ready_line is None:
        process.kill()
        process.wait()
        drainer.join(STOP_TIMEOUT_SECONDS)
        assert process.stderr is not None
        process.stderr.close()
        raise AssertionError("bridge-store serve did not become ready:\n" + "".join(lines))
    ready = json.loads(ready_line[len(READY_PREFIX) :])
    return ServerProcess(
        process=process,
        url=ready["url"],
        token=token,
        ready=ready,
        stderr_lines=lines,
        drain=drainer,
    )


@contextmanager
def serve(
    *args: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
    cwd: str | None = None,
) -> Iterator[ServerProcess]:
    """``start_server`` as a context manager that stops the server on exit."""
    server = start_server(*args, env=env, token=token, cwd=cwd)
    try:
        yield server
    finally:
        server.stop()
