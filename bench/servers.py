"""The servers ``python -m bench load`` measures, each its own process, started fresh.

- ``memory``, ``sqlite``, ``postgres``, ``redis``, ``s3``: ``bridge-store serve`` on
  that backend (through ``bridge_store.client.start_serve``, log level warning, no
  access log). Postgres gets a new database, dropped afterwards; Redis a new key
  prefix, deleted afterwards; S3 a moto server in another process (all three from
  ``testkit.services``).
- ``reference``: cursor-sdk's ``StoreCallbackServer`` over ``bench.reference_store``.
- ``ceiling``: a raw ASGI app on uvicorn with the settings of ``bridge-store serve``
  (httptools, uvloop, no access log) that reads and parses the body as the real path
  does and answers a fixed CallStore response: the most any server on that stack
  can do.

The reference, ceiling and S3 servers run as ``python -m bench.servers KIND`` and
print ``bench-server ready {"url": ...}`` on stdout once they accept connections.
Postgres and Redis are the servers ``testkit.services`` names, by default the machine's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge_store.client import start_serve
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.serving import UVICORN_SETTINGS
from testkit.services import S3Server, postgres_database, redis_prefix, s3_store_url

ROOT = Path(__file__).resolve().parent.parent
READY_PREFIX = "bench-server ready "
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
BACKENDS = ("memory", "sqlite", "postgres", "redis", "s3")
TARGETS = (*BACKENDS, "reference", "ceiling")
#: What the ceiling answers: a stored event of the size an append returns.
CEILING_RESPONSE = json.dumps(
    {
        "output": {
            "runId": "run-8b8b23f4-a981-4f17-aded-4a5a61d44833",
            "seq": 1,
            "offset": "1",
            "eventType": "run_stream_event",
            "payload": {
                "schemaVersion": 1,
                "type": "sdk_message",
                "agentId": "agent-32faf2c2-550d-460d-a73c-a14aef145273",
                "runId": "run-8b8b23f4-a981-4f17-aded-4a5a61d44833",
                "message": {"type": "status", "status": "RUNNING"},
            },
            "payloadRef": None,
            "idempotencyKey": None,
            "createdAt": 1795994234207,
        }
    },
    separators=(",", ":"),
).encode()


@dataclass
class Server:
    """A server under test: where it listens and what it is."""

    name: str
    url: str  # base URL, ending in "/"
    token: str
    pid: int  # the server process, whose CPU time is measured
    #: A real store: its answers are checked and its event logs audited afterwards.
    is_store: bool
    #: The last lines the server wrote to stderr, for reports of failed runs.
    log_tail: Callable[[], list[str]] = list


# -- child processes ---------------------------------------------------------------


@dataclass
class Child:
    """A ``python -m bench.servers KIND`` process and its ready line."""

    process: subprocess.Popen[str]
    ready: dict[str, Any]
    #: The child's stderr. Not the terminal's: the reference server prints a traceback
    #: for every connection wrk drops with a request in flight when a run ends.
    log: Path

    def log_tail(self, lines: int = 20) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()[-lines:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_child(kind: str, token: str, log: Path) -> Child:
    """Start ``python -m bench.servers kind`` and wait for its ready line."""
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.servers", kind],
            cwd=ROOT,
            env={**os.environ, "BENCH_SERVER_TOKEN": token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    stdout = process.stdout
    assert stdout is not None
    lines: list[str] = []
    # A reader thread, so a child that hangs silently cannot hang the bench.
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_SECONDS)
    child = Child(process, {}, log)
    if not lines or not lines[0].startswith(READY_PREFIX):
        child.stop()
        output = "\n".join(child.log_tail())
        raise RuntimeError(f"bench server {kind!r} did not start: {lines[:1]}\n{output}")
    child.ready = json.loads(lines[0][len(READY_PREFIX) :])
    return child


def _listener() -> socket.socket:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(2048)
    return listener


def _announce(url: str, **extra: Any) -> None:
    print(READY_PREFIX + json.dumps({"url": url, **extra}), flush=True)


def serve_reference(token: str) -> None:
    import cursor_sdk

    from bench.reference_store import ReferenceStore

    server = cursor_sdk.StoreCallbackServer(ReferenceStore(), port=0, auth_token=token)
    _announce(server.endpoint.url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    stop.wait()
    server.close()


def ceiling_app() -> Any:
    """The ceiling: a raw ASGI app that parses the body and answers a fixed response.

    It does what the real CallStore path cannot skip and nothing else: the same body
    read (``connect.read_body``), the same JSON codec (orjson with its exact fallback,
    the depth check) and a response sent the same way (``wire.replies.Reply``, two ASGI
    messages). No router, no auth, no dispatch, no store. A body the codec refuses
    gets the Connect error the real path would give.
    """
    from bridge_store.errors import ConnectError
    from bridge_store.rpc.connect import read_body
    from bridge_store.wire._codecs import CODECS
    from bridge_store.wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
    from bridge_store.wire.replies import Reply, error_response

    codec = CODECS["json"]
    answer = Reply(200, CEILING_RESPONSE, codec.media_type)
    not_found = Reply(404, b"Not Found", "text/plain")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] != CALL_STORE_PATH or scope["method"] != "POST":
            await not_found.send(send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        try:
            codec.decode(await read_body(receive, length, DEFAULT_MAX_REQUEST_BYTES))
        except ConnectError as error:
            await error_response(error).send(send)
            return
        await answer.send(send)

    return app


def serve_ceiling() -> None:
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                _announce(f"http://127.0.0.1:{listener.getsockname()[1]}/")

    listener = _listener()
    # bridge-store serve's own uvicorn settings; uvicorn picks httptools and uvloop,
    # both installed with bridge-store, as it does for serve.
    config = uvicorn.Config(
        ceiling_app(), log_level="warning", access_log=False, **UVICORN_SETTINGS
    )
    Announcing(config).run(sockets=[listener])


def serve_s3() -> None:
    server = S3Server()
    server.start()
    server.create_bucket()
    _announce(server.endpoint_url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    stop.wait()
    server.stop()


# -- backends' setup and clean-up --------------------------------------------------


@contextlib.contextmanager
def s3_bucket(directory: Path) -> Iterator[str]:
    """A store URL on a fresh moto S3 server process (its state goes with it)."""
    child = start_child("s3", "", directory / "s3.log")
    try:
        yield s3_store_url(child.ready["url"], "bench/")
    finally:
        child.stop()


@contextlib.contextmanager
def store_url(backend: str, directory: Path) -> Iterator[str]:
    if backend == "memory":
        yield "memory://"
    elif backend == "sqlite":
        yield f"sqlite:///{directory}/bench.db"
    elif backend == "postgres":
        with postgres_database() as url:
            yield url
    elif backend == "redis":
        with redis_prefix() as url:
            yield url
    elif backend == "s3":
        with s3_bucket(directory) as url:
            yield url
    else:
        raise ValueError(f"unknown backend {backend!r}")


@contextlib.contextmanager
def running(target: str, *, serve_args: Sequence[str] = ()) -> Iterator[Server]:
    """Start ``target`` fresh, yield it, stop it and clean up after it."""
    with (
        tempfile.TemporaryDirectory(prefix="bridge-store-bench-") as directory,
        _running(target, Path(directory), serve_args) as server,
    ):
        yield server


@contextlib.contextmanager
def _running(target: str, directory: Path, serve_args: Sequence[str]) -> Iterator[Server]:
    token = secrets.token_urlsafe(24)
    if target in BACKENDS:
        with store_url(target, directory) as url:
            args = ["--host", "127.0.0.1", "--port", "0", "--store", url, "--log-level", "warning"]
            args += list(serve_args)
            with start_serve(args, auth_token=token) as sidecar:
                yield Server(
                    target,
                    sidecar.url,
                    token,
                    sidecar.process.pid,
                    is_store=True,
                    log_tail=sidecar.stderr_tail,
                )
        return
    if target not in ("reference", "ceiling"):
        raise ValueError(f"unknown target {target!r}; one of: {', '.join(TARGETS)}")
    child = start_child(target, token, directory / f"{target}.log")
    try:
        yield Server(
            target,
            child.ready["url"],
            token,
            child.process.pid,
            is_store=target == "reference",
            log_tail=child.log_tail,
        )
    finally:
        child.stop()


def _serve(kind: str) -> None:
    token = os.environ.get("BENCH_SERVER_TOKEN", "")
    if kind == "reference":
        serve_reference(token)
    elif kind == "ceiling":
        serve_ceiling()
    elif kind == "s3":
        serve_s3()
    else:
        raise SystemExit(f"unknown server kind {kind!r}")


if __name__ == "__main__":
    _serve(sys.argv[1])
