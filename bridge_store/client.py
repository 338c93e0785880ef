"""Launch the real ``cursor-sdk-bridge`` wired to a bridge-store server.

The bridge ships in the ``cursor-sdk`` package (the ``client`` extra). It sends every
store operation to the server named by ``--store-callback-url`` once it is told, with
``--local-store '{"type":"custom"}'``, that the host owns the store::

    with (
        start_sidecar("sqlite:///agents.db") as store,
        launch_bridge(store.url, store.auth_token, workspace=project) as bridge,
        bridge.client() as client,  # a cursor_sdk.Client
    ):
        agent = client.agents.create(
            model="composer-2", api_key=key, local=local_options(project)
        )

``start_sidecar`` runs ``bridge-store serve`` as a child process for callers that do
not already have a store server; ``bridge_main`` is the ``bridge-store bridge`` command.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, TextIO

from .config import READY_PREFIX
from .errors import ConfigurationError
from .tokens import TOKEN_ENV

if TYPE_CHECKING:
    import cursor_sdk

INSTALL_HINT = "pip install 'bridge-store[client]'"
BRIDGE_READY_PREFIX = "cursor-sdk-bridge ready "
#: The store config the bridge and every agent's ``local.store`` must carry.
LOCAL_STORE: Mapping[str, str] = {"type": "custom"}
#: Starting the bridge loads a Node runtime; on a busy two-core machine that takes seconds.
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0
#: Diagnostic lines kept from a child's stderr for error messages.
_TAIL_LINES = 200

# The bridge runs model-driven shell tools that inherit its environment, so the store
# token travels only on its command line and these variables are removed from its env.
_SECRET_ENV = (
    TOKEN_ENV,
    "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_STORE_CALLBACK_TOKEN",
)


def _cursor_sdk() -> Any:
    try:
        import cursor_sdk
    except ImportError:
        raise ConfigurationError(
            f"the bundled bridge client needs the cursor-sdk package: {INSTALL_HINT}"
        ) from None
    return cursor_sdk


def bridge_path() -> str:
    """Where the installed ``cursor-sdk`` keeps its ``cursor-sdk-bridge`` launcher."""
    _cursor_sdk()
    from cursor_sdk._vendor import resolve_bridge_path

    path: str = resolve_bridge_path()
    return path


def local_options(cwd: str | os.PathLike[str]) -> dict[str, Any]:
    """``local`` agent options that keep the agent's history in the store."""
    return {"cwd": os.fspath(cwd), "store": dict(LOCAL_STORE)}


class _StderrPump:
    """Reads a child's stderr for its whole life, so a chatty child never blocks.

    Remembers the first line starting with ``prefix`` (the ready line) and the last
    lines for error messages; ``echo`` gets every line as it arrives.
    """

    def __init__(self, stream: IO[str], prefix: str, echo: TextIO | None) -> None:
        self._prefix = prefix
        self._echo = echo
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self.ready_line: str | None = None
        #: Every process holding the pipe has closed it (usually: the child exited).
        self.closed = False
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._lock:
                self._tail.append(line)
            if self.ready_line is None and line.startswith(self._prefix):
                self.ready_line = line
                self._settled.set()
            if self._echo is not None:
                # A closed or broken echo target must not stop the draining.
                with contextlib.suppress(OSError, ValueError):
                    self._echo.write(line)
                    self._echo.flush()
        stream.close()
        self.closed = True
        self._settled.set()

    def wait_ready(self, timeout: float) -> str | None:
        """The ready line, or None if the child closed stderr or ``timeout`` passed."""
        self._settled.wait(timeout)
        return self.ready_line

    def tail(self) -> list[str]:
        with self._lock:
            return list(self._tail)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def alive(self) -> bool:
        """Whether some process still holds the stderr pipe open."""
        return self._thread.is_alive()


def _signal_group(process: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def _stop(process: subprocess.Popen[str], pump: _StderrPump, timeout: float) -> int:
    """Stop the child and everything it started; returns the child's exit status.

    Children run in their own session because the bridge launcher is a shell script
    that runs Node as its own child: signalling the launcher alone would orphan Node.
    The group is done when every process holding the stderr pipe has closed it.
    """
    if process.poll() is None or pump.alive():
        _signal_group(process, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
        pump.join(timeout)
        if process.poll() is None or pump.alive():
            _signal_group(process, signal.SIGKILL)
    status = process.wait()
    pump.join(timeout)
    return status


def _start(
    argv: Sequence[str],
    env: Mapping[str, str],
    prefix: str,
    echo: TextIO | None,
    timeout: float,
    what: str,
) -> tuple[subprocess.Popen[str], _StderrPump, dict[str, Any]]:
    """Start a child that announces itself with one JSON ready line on stderr."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=dict(env),
            start_new_session=True,
        )
    except OSError as error:
        raise ConfigurationError(f"cannot start {what} ({argv[0]}): {error}") from None
    assert process.stderr is not None
    pump = _StderrPump(process.stderr, prefix, echo)
    try:
        return process, pump, _await_ready(process, pump, prefix, timeout, what)
    except BaseException:
        # Also when interrupted (Ctrl-C, a signal handler): never leave the child behind.
        _stop(process, pump, STOP_TIMEOUT_SECONDS)
        raise


def _await_ready(
    process: subprocess.Popen[str], pump: _StderrPump, prefix: str, timeout: float, what: str
) -> dict[str, Any]:
    line = pump.wait_ready(timeout)
    payload: Any = None
    if line is not None:
        try:
            payload = json.loads(line[len(prefix) :])
        except json.JSONDecodeError:
            payload = None
    if isinstance(payload, dict):
        return payload
    if line is not None:
        reason = f"printed an unreadable ready line {line.strip()!r}"
    elif pump.closed:
        # The pipe closes a moment before the exit status can be collected.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_TIMEOUT_SECONDS)
        reason = f"exited with status {process.poll()} before it was ready"
    else:
        reason = f"printed no ready line within {timeout:g}s"
    output = "".join(pump.tail()).rstrip()
    raise ConfigurationError(f"{what} {reason}" + (f":\n{output}" if output else ""))


@dataclass
class Sidecar:
    """A ``bridge-store serve`` child process; a context manager that stops it on exit."""

    process: subprocess.Popen[str]
    url: str
    auth_token: str
    ready: dict[str, Any]
    _pump: _StderrPump = field(repr=False)

    def stderr_tail(self) -> list[str]:
        return self._pump.tail()

    def close(self) -> int:
        """SIGTERM (the server drains in-flight requests) and wait; the exit status."""
        return _stop(self.process, self._pump, STOP_TIMEOUT_SECONDS * 3)

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def start_sidecar(
    store: str,
    *,
    agents: str | None = None,
    runs: str | None = None,
    run_events: str | None = None,
    checkpoints: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    auth_token: str | None = None,
    migrate: bool = True,
    log_level: str = "warning",
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> Sidecar:
    """Start ``bridge-store serve`` for ``store`` (and per-substore URLs) on a free port.

    The token (a new random one unless given) reaches the server through its
    environment, never its command line, where other local users could read it.
    """
    args = ["--host", host, "--port", str(port), "--store", store, "--log-level", log_level]
    for flag, url in (
        ("--agents", agents),
        ("--runs", runs),
        ("--run-events", run_events),
        ("--checkpoints", checkpoints),
    ):
        if url is not None:
            args += [flag, url]
    if not migrate:
        args.append("--no-migrate")
    return start_serve(args, auth_token=auth_token, env=env, echo=echo, timeout=timeout)


def start_serve(
    args: Sequence[str],
    *,
    auth_token: str | None = None,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> Sidecar:
    """Start ``bridge-store serve *args`` and wait until it is ready.

    The lower level of :func:`start_sidecar`, for callers that pass serve's own
    options. The token (a new random one unless given) reaches the server through its
    environment, never its command line.
    """
    token = auth_token or secrets.token_urlsafe(32)
    child_env = {**os.environ, **(env or {}), TOKEN_ENV: token}
    argv = [sys.executable, "-m", "bridge_store", "serve", *args]
    process, pump, ready = _start(
        argv, child_env, READY_PREFIX, echo, timeout, "bridge-store serve"
    )
    return Sidecar(
        process=process, url=str(ready["url"]), auth_token=token, ready=ready, _pump=pump
    )


@dataclass
class BridgeProcess:
    """A running ``cursor-sdk-bridge`` that stores agents in a bridge-store server.

    ``url``/``auth_token`` are the bridge's own Connect endpoint (what the SDK talks
    to), not the store's. A context manager that stops the bridge on exit.
    """

    process: subprocess.Popen[str]
    url: str
    auth_token: str
    ready: dict[str, Any]
    store_url: str
    _pump: _StderrPump = field(repr=False)

    def client(self, **options: Any) -> cursor_sdk.Client:
        """A ``cursor_sdk.Client`` for this bridge; ``options`` go to its constructor."""
        client: cursor_sdk.Client = _cursor_sdk().Client(**self._client_options(options))
        return client

    def async_client(self, **options: Any) -> cursor_sdk.AsyncClient:
        """A ``cursor_sdk.AsyncClient`` for this bridge."""
        client: cursor_sdk.AsyncClient = _cursor_sdk().AsyncClient(**self._client_options(options))
        return client

    def _client_options(self, options: dict[str, Any]) -> dict[str, Any]:
        # This process launched the bridge on its own machine: the trust the SDK gives
        # a bridge it launches itself. Without it the SDK refuses run-scoped calls
        # (observe, wait) that carry no API key.
        return {
            "allow_api_key_env_fallback": True,
            **options,
            "base_url": self.url,
            "auth_token": self.auth_token,
        }

    def stderr_tail(self) -> list[str]:
        return self._pump.tail()

    def close(self) -> int:
        """Stop the bridge (SIGTERM, then SIGKILL) and remove its token file."""
        status = _stop(self.process, self._pump, STOP_TIMEOUT_SECONDS)
        _remove_token_file(self.ready.get("authTokenFile"))
        return status

    def __enter__(self) -> BridgeProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _remove_token_file(value: Any) -> None:
    # The bridge writes its token to a fresh $TMPDIR/cursor-sdk-bridge-*/auth-token and
    # leaves it behind when stopped; only that exact shape is removed.
    if not isinstance(value, str):
        return
    path = Path(value)
    if path.name != "auth-token" or not path.parent.name.startswith("cursor-sdk-bridge-"):
        return
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def bridge_argv(
    store_url: str,
    auth_token: str,
    *,
    command: Sequence[str] | None = None,
    host: str | None = None,
    port: int | None = None,
    workspace: str | os.PathLike[str] | None = None,
    state_root: str | os.PathLike[str] | None = None,
    verbose: bool = False,
) -> list[str]:
    """The bridge command line that points it at the store server at ``store_url``."""
    argv = list(command) if command is not None else [bridge_path()]
    argv += ["--store-callback-url", store_url, "--store-callback-auth-token", auth_token]
    argv += ["--local-store", json.dumps(dict(LOCAL_STORE), separators=(",", ":"))]
    if host is not None:
        argv += ["--host", host]
    if port is not None:
        argv += ["--port", str(port)]
    if workspace is not None:
        argv += ["--workspace", os.fspath(workspace)]
    if state_root is not None:
        argv += ["--state-root", os.fspath(state_root)]
    if verbose:
        argv.append("--verbose")
    return argv


def launch_bridge(
    store_url: str,
    auth_token: str,
    *,
    command: Sequence[str] | None = None,
    host: str | None = None,
    port: int | None = None,
    workspace: str | os.PathLike[str] | None = None,
    state_root: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> BridgeProcess:
    """Start the bridge against the store server at ``store_url`` and wait until ready.

    ``workspace`` is the bridge's default ``cwd`` for agent operations that name none.
    ``env`` adds to (or overrides) the inherited environment, e.g. ``CURSOR_BACKEND_URL``;
    ``echo`` receives the bridge's stderr lines, ready line included. ``command``
    replaces the installed launcher (the store flags are appended to it).
    """
    if not store_url.endswith("/"):
        store_url += "/"
    argv = bridge_argv(
        store_url,
        auth_token,
        command=command,
        host=host,
        port=port,
        workspace=workspace,
        state_root=state_root,
        verbose=verbose,
    )
    child_env = {**os.environ, **(env or {})}
    for name in _SECRET_ENV:
        child_env.pop(name, None)
    process, pump, ready = _start(
        argv, child_env, BRIDGE_READY_PREFIX, echo, timeout, "cursor-sdk-bridge"
    )
    try:
        endpoint = _cursor_sdk().BridgeEndpoint.from_discovery(ready)
    except Exception as error:
        _stop(process, pump, STOP_TIMEOUT_SECONDS)
        raise ConfigurationError(
            f"cursor-sdk-bridge announced an unusable endpoint: {error}"
        ) from None
    return BridgeProcess(
        process=process,
        url=str(endpoint.url),
        auth_token=str(endpoint.auth_token),
        ready=ready,
        store_url=store_url,
        _pump=pump,
    )


def read_auth_token(token_file: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str:
    """The store token from ``$BRIDGE_STORE_AUTH_TOKEN``, else from ``token_file``."""
    from_env = environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    if token_file is None:
        raise ConfigurationError(f"no store token: set {TOKEN_ENV} or pass --auth-token-file")
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigurationError(f"cannot read auth token file {token_file}: {error}") from None
    if not token:
        raise ConfigurationError(f"auth token file {token_file} is empty")
    return token


class _Terminated(Exception):
    pass


class _StopRequest:
    """SIGTERM/SIGINT handling for ``bridge_main``.

    A signal during the launch is only remembered: ``launch_bridge`` cleans up after
    itself, but an exception landing between its return and the assignment of its
    result would leave the bridge, which runs in its own session, behind. Once armed,
    the handler raises to interrupt the wait for the bridge.
    """

    def __init__(self) -> None:
        self.requested = False
        self.armed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.armed:
            raise _Terminated


def bridge_main(
    store_url: str,
    token_file: str | None,
    *,
    host: str | None = None,
    port: int | None = None,
    workspace: str | None = None,
    state_root: str | None = None,
    verbose: bool = False,
    environ: Mapping[str, str] | None = None,
) -> int:
    """``bridge-store bridge``: run the bridge in the foreground against a running store.

    The bridge's stderr, its ``cursor-sdk-bridge ready {JSON}`` line included, is
    passed through unchanged, so whatever launches ``cursor-sdk-bridge`` and reads
    that line can launch this instead. Runs until the bridge exits or this process
    gets SIGTERM/SIGINT (then stops the bridge and returns 0; a signal during the
    launch takes effect once the bridge is up); otherwise returns the bridge's exit
    status. Raises ConfigurationError for a missing token or a bridge that does not
    start.
    """
    token = read_auth_token(token_file, os.environ if environ is None else environ)
    stop = _StopRequest()
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    bridge: BridgeProcess | None = None
    try:
        bridge = launch_bridge(
            store_url,
            token,
            host=host,
            port=port,
            workspace=workspace,
            state_root=state_root,
            verbose=verbose,
            echo=sys.stderr,
        )
        stop.armed = True
        if stop.requested:
            return 0
        status = bridge.process.wait()
        # Killed by a signal: the shell's convention, not a negative exit status.
        return status if status >= 0 else 128 - status
    except _Terminated:
        return 0
    finally:
        if bridge is not None:
            bridge.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
