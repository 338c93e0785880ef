"""The bridge's own CallStore client (JavaScript inside ``cursor-sdk``), driven from a test.

The real bridge only writes checkpoint blobs and finished runs when a model answers,
which never happens offline. Its store client is the code that would send them, so
tests run that code directly: ``bridge_store_client.mjs`` (ours, beside this file)
imports the modules of the bridge vendored in an installed ``cursor-sdk`` by path and
runs them on the bridge's own Node. :class:`BridgeStoreClient` talks to it, one JSON
line each way per call. Nothing of the package is copied into this repository.
"""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

DRIVER = Path(__file__).with_name("bridge_store_client.mjs")
#: One call moves at most a few MiB through Node on a busy two-core machine.
CALL_TIMEOUT_SECONDS = 120.0

#: Connect's code numbers (the gRPC ones) by name, as a ConnectError carries them.
CONNECT_CODES = {
    1: "canceled",
    2: "unknown",
    3: "invalid_argument",
    4: "deadline_exceeded",
    5: "not_found",
    6: "already_exists",
    7: "permission_denied",
    8: "resource_exhausted",
    9: "failed_precondition",
    10: "aborted",
    11: "out_of_range",
    12: "unimplemented",
    13: "internal",
    14: "unavailable",
    15: "data_loss",
    16: "unauthenticated",
}


def bridge_directory(bridge_launcher: str | Path) -> Path:
    """The vendored bridge's directory, from its launcher (``.../bridge/bin/cursor-sdk-bridge``)."""
    return Path(bridge_launcher).resolve().parent.parent


def blob(data: bytes) -> dict[str, str]:
    """Bytes as the driver takes them (a Uint8Array on the bridge's side)."""
    return {"bytes": base64.b64encode(data).decode("ascii")}


def message(data: bytes) -> dict[str, str]:
    """An opaque protobuf message whose ``toBinary()`` is ``data`` (saveCheckpoint's input)."""
    return {"binaryMessage": base64.b64encode(data).decode("ascii")}


def unblob(value: Any) -> bytes:
    """The bytes of a Uint8Array the bridge returned."""
    assert isinstance(value, dict), value
    assert set(value) == {"bytes"}, value
    return base64.b64decode(value["bytes"])


class BridgeCallError(Exception):
    """What the bridge's client threw: a ConnectError has a Connect ``code`` name."""

    def __init__(self, name: str, code: str | None, message: str) -> None:
        super().__init__(f"{name} [{code}]: {message}")
        self.name = name
        self.code = code
        self.message = message


class BridgeStoreClient:
    """The bridge's ``createCallbackLocalAgentStore()`` pointed at a store server.

    ``store(substore, method, input)`` calls the callback store exactly as the bridge
    does (``checkpoints.get`` answers bytes or None); ``platform(object, method, *args)``
    calls ``createAgentPlatform({localStore})``'s ``store`` (runs and agents
    bookkeeping) or ``checkpointStore`` (blob persistence) over the same store.
    """

    def __init__(self, bridge_dir: Path, url: str, auth_token: str, workspace: str) -> None:
        self._start(bridge_dir)
        self._request(
            {"op": "configure", "url": url, "authToken": auth_token, "workspace": workspace}
        )

    def _start(self, bridge_dir: Path) -> None:
        self._process = subprocess.Popen(
            [str(bridge_dir / "bin" / "node"), str(DRIVER), str(bridge_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True),
            threading.Thread(target=self._stderr.extend, args=(self._process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._answers.put(line)
        self._answers.put(None)

    def _request(self, request: dict[str, Any]) -> Any:
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        try:
            line = self._answers.get(timeout=CALL_TIMEOUT_SECONDS)
        except queue.Empty:
            raise AssertionError(f"the bridge client did not answer {request.get('op')}") from None
        if line is None:
            raise AssertionError("the bridge client exited:\n" + "".join(self._stderr[-40:]))
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            error = answer["error"]
            code = CONNECT_CODES.get(error["code"]) if error["code"] is not None else None
            raise BridgeCallError(error["name"], code, error["message"])
        return answer["ok"]

    def store(self, substore: str, method: str, input: dict[str, Any] | None = None) -> Any:
        return self._request(
            {"op": "store", "substore": substore, "method": method, "input": input}
        )

    def platform(self, target: str, method: str, *args: Any) -> Any:
        return self._request({"op": "platform", "object": target, "method": method, "args": args})

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for reader in self._readers:
            reader.join(timeout=30)
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> BridgeStoreClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class LocalStoreClient(BridgeStoreClient):
    """The SDK's own built-in store on files, as a bridge without a store server uses it.

    ``store`` is the ``--local-store`` JSON: ``{"type": "sqlite", "stateRoot": DIR}``
    (one workspace's store directory) or ``{"type": "jsonl", "rootDir": DIR}``. The
    same ``store``/``platform`` calls as :class:`BridgeStoreClient`, on those files.
    """

    def __init__(self, bridge_dir: Path, store: dict[str, str], workspace: str) -> None:
        self._start(bridge_dir)
        request = {"op": "open-local", "kind": store["type"], "workspace": workspace}
        self._request({**request, **{k: v for k, v in store.items() if k != "type"}})
