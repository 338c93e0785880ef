"""A stand-in for the three Cursor cloud endpoints a local agent needs, so tests run offline.

The real bridge looks for the Cursor API at ``CURSOR_BACKEND_URL``. A local agent
exchanges its API key for an access token and lists models when it is created; a run
then opens ``RunSSE``. Refusing that with ``permission_denied`` ends the run at once
with status ``error``, after the bridge has written the run row and its events through
the store, which is exactly the traffic the end-to-end tests want to see.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

ACCESS_TOKEN = "stand-in-access-token"
MODEL_ID = "composer-2"
EXCHANGE_PATH = "/auth/exchange_user_api_key"
MODELS_PATH = "/v1/models"
RUN_PATH = "/agent.v1.AgentService/RunSSE"
REFUSAL_MESSAGE = "the stand-in Cursor API runs no models"


class _QuietServer(ThreadingHTTPServer):
    """Drops connections the bridge resets without printing a traceback for each."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


@dataclass(frozen=True, slots=True)
class Request:
    """One request the stand-in answered."""

    method: str
    path: str
    authorization: str


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: Mapping[str, Any]


_ANSWERS: dict[tuple[str, str], _Answer] = {
    ("POST", EXCHANGE_PATH): _Answer(200, {"accessToken": ACCESS_TOKEN}),
    ("GET", MODELS_PATH): _Answer(
        200, {"items": [{"id": MODEL_ID, "displayName": "Composer 2 (stand-in)"}]}
    ),
    ("POST", RUN_PATH): _Answer(403, {"code": "permission_denied", "message": REFUSAL_MESSAGE}),
}
_UNKNOWN = _Answer(404, {"code": "not_found", "message": "not served by the stand-in"})
#: Bridges before cursor-sdk 1.1.0 retry a ``permission_denied`` run four times over
#: about 16 s before giving up; ``unauthenticated`` ends the run at once on every
#: published bridge (measured on 0.1.9, 1.0.30 and 1.1.0).
UNAUTHENTICATED_RUN = _Answer(401, {"code": "unauthenticated", "message": REFUSAL_MESSAGE})


class CursorApiStub:
    """A loopback HTTP server answering the Cursor API paths above; a context manager.

    ``url`` goes into the bridge's ``CURSOR_BACKEND_URL``; ``requests()`` lists what
    was asked, so a test can prove the bridge really talked to the stand-in.
    ``refuse_runs_as_unauthenticated`` answers ``RunSSE`` 401 instead of 403, which
    older bridges do not retry.
    """

    def __init__(self, *, refuse_runs_as_unauthenticated: bool = False) -> None:
        self._answers = dict(_ANSWERS)
        if refuse_runs_as_unauthenticated:
            self._answers[("POST", RUN_PATH)] = UNAUTHENTICATED_RUN
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="cursor-api-stub", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def paths(self) -> list[str]:
        return [request.path for request in self.requests()]

    def start(self) -> CursorApiStub:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> CursorApiStub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            # The bridge keeps connections alive between calls.
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def _answer(self, method: str) -> None:
                self._drain_body()
                path = self.path.split("?", 1)[0]
                stub._record(Request(method, path, self.headers.get("Authorization", "")))
                answer = stub._answers.get((method, path), _UNKNOWN)
                body = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drain_body(self) -> None:
                # Unread request bytes would be parsed as the next request on a
                # kept-alive connection.
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
                        self.rfile.read(size + 2)
                    while self.rfile.readline().strip():
                        pass
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)

            def log_message(self, format: str, *args: Any) -> None:
                # Quiet: pytest shows the recorded requests when a test fails.
                return

        return Handler
