"""Run ``bridge-store serve`` as a real subprocess and talk CallStore to it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bridge_store.client import Sidecar, start_serve
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.connect import CALL_STORE_PATH as ROUTE

#: The route relative to a server URL (which ends in "/").
CALL_STORE_PATH = ROUTE.lstrip("/")


class StoreHttpClient:
    """A CallStore client over its own HTTP connection (one per thread under load)."""

    def __init__(self, url: str, token: str, *, new_connections: bool = False) -> None:
        """``new_connections``: each call on a connection of its own, so that any worker
        of ``serve --workers N`` may answer it (kept alive, they all go to one)."""
        self._url = url + CALL_STORE_PATH
        one_use: dict[str, Any] = (
            {"limits": httpx.Limits(max_keepalive_connections=0)} if new_connections else {}
        )
        self._http = httpx.Client(
            timeout=60.0,
            headers={"Authorization": f"Bearer {token}", "Connect-Protocol-Version": "1"},
            **one_use,
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
    """A running ``bridge-store serve`` subprocess, with a CallStore client for it."""

    sidecar: Sidecar
    client: StoreHttpClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = StoreHttpClient(self.url, self.token)

    @property
    def process(self) -> subprocess.Popen[str]:
        return self.sidecar.process

    @property
    def url(self) -> str:
        return self.sidecar.url

    @property
    def token(self) -> str:
        return self.sidecar.auth_token

    @property
    def ready(self) -> dict[str, Any]:
        return self.sidecar.ready

    @property
    def stderr_lines(self) -> list[str]:
        """What the server wrote to stderr (its last lines, if it wrote very many)."""
        return self.sidecar.stderr_tail()

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
        """SIGTERM (then SIGKILL, see bridge_store.client) and wait; the exit code."""
        self.client.close()
        return self.sidecar.close()


def start_server(
    *args: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
    tokens_file: Path | None = None,
) -> ServerProcess:
    """Start ``bridge-store serve --port 0 *args`` and wait for its ready line.

    With ``tokens_file`` the server takes its named tokens, and ``token`` is the one
    the returned client calls with.
    """
    return ServerProcess(
        start_serve(["--port", "0", *args], auth_token=token, tokens_file=tokens_file, env=env)
    )


@contextmanager
def serve(
    *args: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
    tokens_file: Path | None = None,
) -> Iterator[ServerProcess]:
    """``start_server`` as a context manager that stops the server on exit."""
    server = start_server(*args, env=env, token=token, tokens_file=tokens_file)
    try:
        yield server
    finally:
        server.stop()
