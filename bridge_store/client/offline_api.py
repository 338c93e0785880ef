"""An offline stand-in for the Cursor API on loopback: ``bridge-store bridge --offline``.

The bridge looks for the Cursor API at ``CURSOR_BACKEND_URL``. Creating a local agent
exchanges its API key for an access token (``/auth/exchange_user_api_key``) and lists
the models (``/v1/models``); the stand-in answers both, for any key. A run then opens
``agent.v1.AgentService/RunSSE``, a Connect server stream whose messages only the
real API can answer. The stand-in runs no model: it ends the stream at once with an
error, in the Connect protocol's own end-of-stream form (an envelope flagged ``0x02``
holding ``{"error": {"code", "message"}}``, as connectrpc.com specifies it), whose
message says why. The bridge ends the run with status ``error`` and that message as
its error, after writing the run row and its events through the store, so the
agent's life cycle (create, send, list, get, observe, archive, resume, delete) runs
end to end with no key and no network. Any other path the bridge asks (settings,
analytics) is answered 404, which it lets pass.

The code is ``unauthenticated``: every published bridge ends the run on it at once,
where ``permission_denied`` has bridges before cursor-sdk 1.1.0 retry for about 16 s
(measured on 0.1.9, 1.0.30 and 1.1.0).
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

#: The variable the bridge reads the Cursor API's address from.
BACKEND_URL_ENV = "CURSOR_BACKEND_URL"
ACCESS_TOKEN = "offline-access-token"  # noqa: S105 - what the stand-in hands out, no secret
#: The SDK asks every agent for an API key; the stand-in takes any, this one when
#: none is given (``Session.agent_options`` of an offline session).
API_KEY = "offline"
MODEL_ID = "composer-2"
EXCHANGE_PATH = "/auth/exchange_user_api_key"
MODELS_PATH = "/v1/models"
RUN_PATH = "/agent.v1.AgentService/RunSSE"
#: A run's error, as the bridge stores it: "[unauthenticated] " and this.
REFUSAL_MESSAGE = (
    "no model runs offline: bridge-store bridge --offline answers for the Cursor API and "
    "stops every run here; give a Cursor API key (CURSOR_API_KEY) and drop --offline to "
    "run one"
)
#: The Connect envelope flag of a stream's last message, which carries its end.
END_STREAM_FLAG = 0x02


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
    content_type: str
    body: bytes


def _json(status: int, body: Mapping[str, Any]) -> _Answer:
    return _Answer(status, "application/json", json.dumps(body).encode())


def end_of_stream(code: str, message: str) -> bytes:
    """A Connect stream's end carrying an error: one envelope, flag 0x02, JSON inside."""
    payload = json.dumps({"error": {"code": code, "message": message}}).encode()
    return bytes([END_STREAM_FLAG]) + len(payload).to_bytes(4, "big") + payload


_ANSWERS: dict[tuple[str, str], _Answer] = {
    ("POST", EXCHANGE_PATH): _json(200, {"accessToken": ACCESS_TOKEN}),
    ("GET", MODELS_PATH): _json(
        200, {"items": [{"id": MODEL_ID, "displayName": "Composer 2 (offline stand-in)"}]}
    ),
    ("POST", RUN_PATH): _Answer(
        200, "application/connect+proto", end_of_stream("unauthenticated", REFUSAL_MESSAGE)
    ),
}
_UNKNOWN = _json(404, {"code": "not_found", "message": "not answered offline"})


class OfflineCursorApi:
    """The stand-in on a free loopback port; a context manager (started on entry).

    ``url`` goes into the bridge's ``CURSOR_BACKEND_URL``; ``requests()`` lists what
    was asked, so a caller can see the bridge really talked to it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="offline-cursor-api", daemon=True
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

    def start(self) -> OfflineCursorApi:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OfflineCursorApi:
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
                answer = _ANSWERS.get((method, path), _UNKNOWN)
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

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
                # Quiet: what was asked is kept in requests().
                return

        return Handler
