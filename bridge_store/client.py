"""Launch the real ``cursor-sdk-bridge`` with its agent store on a bridge-store server.

The bridge ships in the ``cursor-sdk`` package (the ``client`` extra). Told with
``--local-store '{"type":"custom"}'`` that the host owns the store, it sends every
store operation to the server named by ``--store-callback-url``. :func:`launch` does
the whole pairing in one step::

    with launch("sqlite:///agents.db", workspace=project) as session:
        agent = session.client.agents.create(
            session.agent_options(model="composer-2", api_key=key)
        )

It starts ``bridge-store serve`` on a free loopback port (or checks an existing store
given ``store_url`` and ``auth_token``), then the bridge, and stops both on exit. The
lower levels are :func:`start_sidecar` and :func:`launch_bridge`; ``bridge_main`` is
the ``bridge-store bridge`` command.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from . import _process
from .config import READY_PREFIX
from .errors import ConfigurationError
from .tokens import TOKEN_ENV

if TYPE_CHECKING:
    import cursor_sdk

INSTALL_HINT = "pip install 'bridge-store[client]'"
BRIDGE_READY_PREFIX = "cursor-sdk-bridge ready "
#: A launcher to run instead of the one in the installed ``cursor-sdk``; the SDK's own
#: variable, so one setting moves the SDK's bridge and this one alike.
BRIDGE_BIN_ENV = "CURSOR_SDK_BRIDGE_BIN"
#: The store config the bridge and every agent's ``local.store`` must carry.
LOCAL_STORE: Mapping[str, str] = {"type": "custom"}
#: Starting the bridge loads a Node runtime; on a busy two-core machine that takes seconds.
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0
#: The sidecar drains in-flight requests before it exits.
SIDECAR_STOP_TIMEOUT_SECONDS = 30.0
#: How long the store check before launching the bridge waits for an answer.
CHECK_TIMEOUT_SECONDS = 10.0
#: The agent the store check asks for; reading a missing agent changes nothing.
CHECK_AGENT_ID = "bridge-store-check"

# The bridge runs model-driven shell tools that inherit its environment. Store tokens
# travel only on its command line, and no store setting (URLs carry database
# passwords) is inherited: every BRIDGE_STORE_* variable is removed, and these.
_SECRET_ENV = (
    "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_STORE_CALLBACK_TOKEN",
)
_SECRET_ENV_PREFIX = "BRIDGE_STORE_"  # noqa: S105 - a variable prefix, not a secret
#: Flags the client sets on the bridge itself; extra bridge arguments may not repeat them.
_OWN_BRIDGE_FLAGS = ("--store-callback-url", "--store-callback-auth-token", "--local-store")
_CALL_STORE_PATH = "sdk.v1.SdkStoreCallbackService/CallStore"


def _cursor_sdk() -> Any:
    try:
        import cursor_sdk
    except ImportError:
        raise ConfigurationError(
            f"the bundled bridge client needs the cursor-sdk package: {INSTALL_HINT}"
        ) from None
    return cursor_sdk


def bridge_path() -> str:
    """The ``cursor-sdk-bridge`` launcher: ``$CURSOR_SDK_BRIDGE_BIN``, else the SDK's own."""
    override = os.environ.get(BRIDGE_BIN_ENV, "").strip()
    if override:
        return override
    _cursor_sdk()
    from cursor_sdk._vendor import resolve_bridge_path

    path: str = resolve_bridge_path()
    return path


def local_options(cwd: str | os.PathLike[str]) -> dict[str, Any]:
    """``local`` agent options that keep the agent's history in the store."""
    return {"cwd": os.fspath(cwd), "store": dict(LOCAL_STORE)}


def bridge_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the bridge inherits: this environment plus ``env``, without store secrets."""
    merged = {**os.environ, **(env or {})}
    return {
        name: value
        for name, value in merged.items()
        if name not in _SECRET_ENV and not name.startswith(_SECRET_ENV_PREFIX)
    }


# -- the store ------------------------------------------------------------------------


@dataclass
class Sidecar:
    """A ``bridge-store serve`` child process; a context manager that stops it on exit."""

    process: subprocess.Popen[str]
    url: str
    auth_token: str = field(repr=False)
    ready: dict[str, Any]
    _pump: _process.StderrPump = field(repr=False)

    def stderr_tail(self) -> list[str]:
        return self._pump.tail()

    def close(self) -> int:
        """SIGTERM (the server drains in-flight requests) and wait; the exit status."""
        return _process.stop(self.process, self._pump, SIDECAR_STOP_TIMEOUT_SECONDS)

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def sidecar_args(
    store: str | None = None,
    *,
    agents: str | None = None,
    runs: str | None = None,
    run_events: str | None = None,
    checkpoints: str | None = None,
) -> list[str]:
    """``serve`` storage options; what is not given, serve takes from its environment."""
    args: list[str] = []
    for flag, url in (
        ("--store", store),
        ("--agents", agents),
        ("--runs", runs),
        ("--run-events", run_events),
        ("--checkpoints", checkpoints),
    ):
        if url is not None:
            args += [flag, url]
    return args


def start_sidecar(
    store: str | None = None,
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

    URLs not given come from serve's environment (``BRIDGE_STORE_URL`` ...) or its
    default. The token (a new random one unless given) reaches the server through its
    environment, never its command line, where other local users could read it.
    """
    args = ["--host", host, "--port", str(port), "--log-level", log_level]
    args += sidecar_args(
        store, agents=agents, runs=runs, run_events=run_events, checkpoints=checkpoints
    )
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
    process, pump, ready = _process.start(
        argv,
        child_env,
        READY_PREFIX,
        echo,
        timeout,
        "bridge-store serve",
        SIDECAR_STOP_TIMEOUT_SECONDS,
    )
    return Sidecar(
        process=process, url=str(ready["url"]), auth_token=token, ready=ready, _pump=pump
    )


def check_store(url: str, auth_token: str, *, timeout: float = CHECK_TIMEOUT_SECONDS) -> None:
    """Make one harmless CallStore call (``agents.get`` of a missing agent).

    Raises ConfigurationError saying what is wrong: nothing answers at ``url``, the
    store refuses ``auth_token``, or what answers is not a CallStore server. The bridge
    itself would only report these on an agent's first call, as a bare
    ``unauthenticated`` or ``unavailable`` that reads like a problem with the bridge.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"the store URL must start with http:// or https://, not {url!r}")
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        _with_slash(url) + _CALL_STORE_PATH,
        data=json.dumps(
            {"substore": "agents", "method": "get", "input": {"agentId": CHECK_AGENT_ID}}
        ).encode(),
        headers={
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
            "Authorization": f"Bearer {auth_token}",
        },
        method="POST",
    )
    # No proxies: the bridge reaches the store directly, so the check does too.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        if error.code == 401:
            raise ConfigurationError(
                f"the store at {url} rejected the auth token (401 unauthenticated); "
                f"give the token the store was started with"
            ) from None
        detail = error.read(500).decode("utf-8", "replace").strip()
        raise ConfigurationError(
            f"the store at {url} answered a CallStore call with HTTP {error.code}"
            + (f": {detail}" if detail else "")
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ConfigurationError(f"cannot reach the store at {url}: {reason}") from None
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ConfigurationError(f"{url} does not answer like a CallStore server")


def _with_slash(url: str) -> str:
    return url if url.endswith("/") else url + "/"


# -- the bridge -----------------------------------------------------------------------


@dataclass
class BridgeProcess:
    """A running ``cursor-sdk-bridge`` that stores agents in a bridge-store server.

    ``url``/``auth_token`` are the bridge's own Connect endpoint (what the SDK talks
    to), not the store's. A context manager that stops the bridge on exit.
    """

    process: subprocess.Popen[str]
    url: str
    auth_token: str = field(repr=False)
    ready: dict[str, Any]
    store_url: str
    _pump: _process.StderrPump = field(repr=False)

    @property
    def pid(self) -> int:
        """The bridge program's pid (the launcher's child), from its ready line."""
        pid = self.ready.get("pid")
        return pid if isinstance(pid, int) else self.process.pid

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
        status = _process.stop(self.process, self._pump, STOP_TIMEOUT_SECONDS)
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
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The bridge command line that points it at the store server at ``store_url``."""
    for arg in extra_args:
        if arg.split("=", 1)[0] in _OWN_BRIDGE_FLAGS:
            raise ConfigurationError(f"bridge-store sets the bridge's {arg.split('=')[0]} itself")
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
    return argv + list(extra_args)


def bridge_endpoint(ready: Mapping[str, Any]) -> tuple[str, str]:
    """The bridge's URL and bearer token from its ready line (the discovery JSON)."""
    if ready.get("schemaVersion") != 1:
        raise ConfigurationError(f"unsupported discovery schema {ready.get('schemaVersion')!r}")
    if (ready.get("transport"), ready.get("protocol")) != ("tcp", "connect"):
        raise ConfigurationError("the bridge does not announce a Connect endpoint over TCP")
    url = str(ready.get("url") or "")
    if not url:
        host, port = str(ready.get("host") or ""), ready.get("port")
        if not host or not port:
            raise ConfigurationError("the bridge announced no URL")
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    token = str(ready.get("authToken") or "").strip()
    token_file = ready.get("authTokenFile")
    if not token and token_file:
        try:
            token = Path(str(token_file)).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigurationError(f"cannot read the bridge's token file: {error}") from None
    if not token:
        raise ConfigurationError("the bridge announced no auth token")
    return url, token


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
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> BridgeProcess:
    """Start the bridge against the store server at ``store_url`` and wait until ready.

    ``workspace`` is the bridge's default ``cwd`` for agent operations that name none.
    ``env`` adds to (or overrides) the inherited environment, e.g. ``CURSOR_BACKEND_URL``;
    ``echo`` receives the bridge's stderr lines, ready line included. ``command``
    replaces the installed launcher; ``extra_args`` go after the client's own flags.
    """
    store_url = _with_slash(store_url)
    argv = bridge_argv(
        store_url,
        auth_token,
        command=command,
        host=host,
        port=port,
        workspace=workspace,
        state_root=state_root,
        verbose=verbose,
        extra_args=extra_args,
    )
    process, pump, ready = _process.start(
        argv,
        bridge_environment(env),
        BRIDGE_READY_PREFIX,
        echo,
        timeout,
        "cursor-sdk-bridge",
        STOP_TIMEOUT_SECONDS,
    )
    try:
        url, token = bridge_endpoint(ready)
    except BaseException as error:
        _process.stop(process, pump, STOP_TIMEOUT_SECONDS)
        _remove_token_file(ready.get("authTokenFile"))
        if isinstance(error, ConfigurationError):
            raise ConfigurationError(
                f"cursor-sdk-bridge announced an unusable endpoint: {error}"
            ) from None
        raise
    return BridgeProcess(
        process=process, url=url, auth_token=token, ready=ready, store_url=store_url, _pump=pump
    )


# -- both at once ---------------------------------------------------------------------


class SessionError(RuntimeError):
    """The bridge or the store stopped while a :class:`Session` was open."""


class Session:
    """A bridge and its store, started by :func:`launch`; a context manager.

    ``client`` is a connected ``cursor_sdk.Client`` (made on first use, closed with
    the session); ``agent_options()`` the options every agent needs. Exiting stops
    the bridge, then the store if the session started it. A watcher notices either
    process ending early: exiting then raises :class:`SessionError` naming it, or,
    when the caller's own exception is already propagating, adds that as a note.
    """

    def __init__(
        self,
        bridge: BridgeProcess,
        sidecar: Sidecar | None,
        *,
        store_url: str,
        store_auth_token: str,
        workspace: str,
    ) -> None:
        self.bridge = bridge
        #: The store server this session started, or None when it uses an existing one.
        self.sidecar = sidecar
        self.store_url = store_url
        self.store_auth_token = store_auth_token
        self.workspace = workspace
        self._lock = threading.Lock()
        self._closing = False
        self._closed = False
        self._failure: str | None = None
        self._ended = threading.Event()
        watched = [("cursor-sdk-bridge", bridge.process, bridge.pid, bridge._pump)]
        if sidecar is not None:
            watched.append(
                ("the store server", sidecar.process, sidecar.process.pid, sidecar._pump)
            )
        for what, process, pid, pump in watched:
            threading.Thread(
                target=self._watch, args=(what, process, pid, pump), daemon=True
            ).start()

    def _watch(
        self, what: str, process: subprocess.Popen[str], pid: int, pump: _process.StderrPump
    ) -> None:
        status = process.wait()
        with self._lock:
            closing = self._closing
        if not closing:
            # The last words of a crashing child follow its exit by a moment.
            pump.join(1.0)
            message = _process.with_output(
                f"{what} (pid {pid}) {_process.describe_status(status)} while the session was open",
                pump,
            )
            with self._lock:
                if not self._closing and self._failure is None:
                    self._failure = message
        self._ended.set()

    @property
    def local(self) -> dict[str, Any]:
        """The ``local`` agent options: the workspace as ``cwd``, the custom store."""
        return local_options(self.workspace)

    def agent_options(self, **options: Any) -> dict[str, Any]:
        """Agent options (``model``, ``api_key`` ...) with ``local`` set for the store.

        A ``local`` given here is kept, but its ``store`` is always the custom one.
        """
        given = dict(options.pop("local", None) or {})
        return {**options, "local": {"cwd": self.workspace, **given, "store": dict(LOCAL_STORE)}}

    @functools.cached_property
    def client(self) -> cursor_sdk.Client:
        """A ``cursor_sdk.Client`` connected to the bridge, closed with the session."""
        return self.bridge.client()

    def async_client(self, **options: Any) -> cursor_sdk.AsyncClient:
        """A new ``cursor_sdk.AsyncClient`` for the bridge; the caller closes it."""
        return self.bridge.async_client(**options)

    @property
    def pids(self) -> list[int]:
        """Every process the session runs: the store (if it started one), the bridge's
        launcher and the bridge program behind it."""
        pids = [] if self.sidecar is None else [self.sidecar.process.pid]
        return [*pids, *dict.fromkeys([self.bridge.process.pid, self.bridge.pid])]

    @property
    def failure(self) -> str | None:
        """What ended early (``cursor-sdk-bridge (pid N) was killed by SIGKILL ...``)."""
        with self._lock:
            return self._failure

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the bridge or the store has ended; whether one has."""
        return self._ended.wait(timeout)

    def check(self) -> None:
        """Raise :class:`SessionError` if the bridge or the store has ended."""
        failure = self.failure
        if failure is not None:
            raise SessionError(failure)

    def close(self) -> None:
        """Stop the bridge, then the store if this session started it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closing = self._closed = True
        try:
            if "client" in self.__dict__:
                self.client.close()
        finally:
            try:
                self.bridge.close()
            finally:
                if self.sidecar is not None:
                    self.sidecar.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        notes = self._explain(exc) if exc is not None else []
        self.close()
        if exc is not None:
            for note in notes:
                exc.add_note(f"bridge-store: {note}")
            return
        self.check()

    def _explain(self, exc: BaseException) -> list[str]:
        """Why an SDK call may have failed: a child that ended, or a store problem."""
        errors = sys.modules.get("cursor_sdk.errors")
        if self.failure is None and errors is not None and isinstance(exc, errors.CursorAgentError):
            if isinstance(exc, errors.NetworkError):
                # The SDK could not reach the bridge: has it ended?
                self._await_exit(self.bridge.process)
            else:
                # The bridge answered with an error: is its store still there for it?
                try:
                    check_store(self.store_url, self.store_auth_token)
                except ConfigurationError as problem:
                    if self.sidecar is not None:
                        self._await_exit(self.sidecar.process)
                    if self.failure is None:
                        return [str(problem)]
        return [] if self.failure is None else [self.failure]

    def _await_exit(self, process: subprocess.Popen[str]) -> None:
        """Give a dying child the moment it needs to be reaped and recorded.

        Its sockets close a moment before its exit status can be collected, so the
        SDK's error can arrive before the watcher has seen the exit.
        """
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            return
        self._ended.wait(STOP_TIMEOUT_SECONDS)


def launch(
    store: str | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    agents: str | None = None,
    runs: str | None = None,
    run_events: str | None = None,
    checkpoints: str | None = None,
    store_url: str | None = None,
    auth_token: str | None = None,
    bridge_command: Sequence[str] | None = None,
    bridge_args: Sequence[str] = (),
    host: str | None = None,
    port: int | None = None,
    state_root: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> Session:
    """Start a store server and the bridge on it; returns the running :class:`Session`.

    ``store`` (and the per-substore URLs) configure an embedded ``bridge-store serve``
    on a free loopback port, like serve's flags; what is not given comes from serve's
    environment (``BRIDGE_STORE_URL`` ...) or its default, ``./bridge-store.db``. With
    ``store_url`` and ``auth_token`` the bridge uses that running store instead, after
    one CallStore call has shown it reachable and accepting the token.

    ``workspace`` (default: the current directory) is the bridge's default ``cwd``.
    ``bridge_command`` replaces the launcher (default ``$CURSOR_SDK_BRIDGE_BIN``, else
    the one in the installed ``cursor-sdk``); ``bridge_args`` are added to its command
    line. ``env`` adds to what both children inherit (store secrets never reach the
    bridge); ``echo`` receives both children's stderr lines.
    """
    workspace = os.fspath(workspace if workspace is not None else os.getcwd())
    command = list(bridge_command) if bridge_command is not None else [bridge_path()]
    sidecar: Sidecar | None = None
    if store_url is not None:
        if auth_token is None:
            raise ConfigurationError("an existing store (store_url) needs its auth_token")
        embedded = (store, agents, runs, run_events, checkpoints)
        if any(url is not None for url in embedded):
            raise ConfigurationError("store URLs configure an embedded store, not store_url")
        check_store(store_url, auth_token)
        token = auth_token
    else:
        sidecar = start_sidecar(
            store,
            agents=agents,
            runs=runs,
            run_events=run_events,
            checkpoints=checkpoints,
            env=env,
            echo=echo,
            timeout=timeout,
        )
        store_url, token = sidecar.url, sidecar.auth_token
    try:
        bridge = launch_bridge(
            store_url,
            token,
            command=command,
            host=host,
            port=port,
            workspace=workspace,
            state_root=state_root,
            verbose=verbose,
            extra_args=bridge_args,
            env=env,
            echo=echo,
            timeout=timeout,
        )
    except BaseException:
        if sidecar is not None:
            sidecar.close()
        raise
    return Session(
        bridge, sidecar, store_url=store_url, store_auth_token=token, workspace=workspace
    )


# -- the bridge-store bridge command --------------------------------------------------


def read_auth_token(token_file: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str:
    """The store token from ``$BRIDGE_STORE_AUTH_TOKEN``, else from ``token_file``."""
    from_env = environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    if token_file is None:
        raise ConfigurationError(f"no store token: set {TOKEN_ENV} or pass --store-auth-token-file")
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

    A signal during the launch is only remembered: ``launch`` cleans up after itself,
    but an exception landing between its return and the assignment of its result
    would leave the children, which run in their own sessions, behind. Once armed,
    the handler raises to interrupt the wait.
    """

    def __init__(self) -> None:
        self.requested = False
        self.armed = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.armed:
            raise _Terminated


def bridge_main(
    *,
    store: str | None = None,
    agents: str | None = None,
    runs: str | None = None,
    run_events: str | None = None,
    checkpoints: str | None = None,
    store_callback_url: str | None = None,
    store_auth_token_file: str | None = None,
    bridge_command: Sequence[str] | None = None,
    bridge_args: Sequence[str] = (),
    host: str | None = None,
    port: int | None = None,
    workspace: str | None = None,
    state_root: str | None = None,
    verbose: bool = False,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
) -> int:
    """``bridge-store bridge``: :func:`launch` in the foreground.

    Prints the bridge's discovery JSON (its ready line's payload) as one line on
    ``stdout``, so any Connect client can attach; both children's stderr, the
    bridge's ``cursor-sdk-bridge ready {JSON}`` line included, passes through on
    stderr. Runs until this process gets SIGTERM/SIGINT (then stops the bridge, then
    the store, and returns 0; a signal during the launch takes effect once both are
    up) or a child ends: then the bridge's exit status, or 1 if the store ended and
    the bridge did not. Raises ConfigurationError when the pair cannot start.
    """
    environ = os.environ if environ is None else environ
    stdout = sys.stdout if stdout is None else stdout
    token: str | None = None
    if store_callback_url is not None:
        token = read_auth_token(store_auth_token_file, environ)
    elif store_auth_token_file is not None:
        raise ConfigurationError("--store-auth-token-file goes with --store-callback-url")
    stop = _StopRequest()
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    session: Session | None = None
    try:
        session = launch(
            store,
            agents=agents,
            runs=runs,
            run_events=run_events,
            checkpoints=checkpoints,
            store_url=store_callback_url,
            auth_token=token,
            workspace=workspace,
            bridge_command=bridge_command,
            bridge_args=bridge_args,
            host=host,
            port=port,
            state_root=state_root,
            verbose=verbose,
            echo=sys.stderr,
        )
        stop.armed = True
        if stop.requested:
            return 0
        print(json.dumps(session.bridge.ready, separators=(",", ":")), file=stdout, flush=True)
        session.wait()
        print(f"bridge-store: {session.failure}", file=sys.stderr, flush=True)
        status = session.bridge.process.poll()
        if status is None:
            return 1
        # Killed by a signal: the shell's convention, not a negative exit status.
        return status if status >= 0 else 128 - status
    except _Terminated:
        return 0
    finally:
        if session is not None:
            session.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
