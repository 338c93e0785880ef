"""The bridge child: the real ``cursor-sdk-bridge`` pointed at a bridge-store server.

The bridge ships in the ``cursor-sdk`` package (the ``client`` extra). Told with
``--local-store '{"type":"custom"}'`` that the host owns the store, it sends every
store operation to the server named by ``--store-callback-url``. :func:`launch_bridge`
starts it and waits for its ready line (its discovery JSON).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigurationError
from ..reaching import server_url
from ._process import START_TIMEOUT_SECONDS, Echo, ReadyProcess, start, stop
from .trust import node_trust, remove_bundle

if TYPE_CHECKING:
    import cursor_sdk

INSTALL_HINT = "pip install 'bridge-store[client]'"
BRIDGE_READY_PREFIX = "cursor-sdk-bridge ready "
#: A launcher to run instead of the one in the installed ``cursor-sdk``; the SDK's own
#: variable, so one setting moves the SDK's bridge and this one alike.
BRIDGE_BIN_ENV = "CURSOR_SDK_BRIDGE_BIN"
#: The store config the bridge and every agent's ``local.store`` must carry.
LOCAL_STORE: Mapping[str, str] = {"type": "custom"}
STOP_TIMEOUT_SECONDS = 10.0

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


@dataclass(kw_only=True)
class BridgeProcess(ReadyProcess):
    """A running ``cursor-sdk-bridge`` that stores agents in a bridge-store server.

    ``url``/``auth_token`` are the bridge's own Connect endpoint (what the SDK talks
    to), not the store's. A context manager that stops the bridge on exit.
    """

    stop_timeout = STOP_TIMEOUT_SECONDS

    url: str
    auth_token: str = field(repr=False)
    store_url: str
    #: The CA bundle made for the bridge (see :mod:`.trust`), removed when it stops.
    ca_bundle: Path | None = None

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

    def close(self) -> int:
        """Stop the bridge (SIGTERM, then SIGKILL) and remove its token file."""
        status = super().close()
        _remove_token_file(self.ready.get("authTokenFile"))
        remove_bundle(self.ca_bundle)
        return status


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


def check_address(host: str | None, port: int | None, flags: tuple[str, str]) -> None:
    """ConfigurationError, in one line, for an address the bridge would refuse or fail
    to listen on: a host that is not loopback, a port another process holds. Found
    before the bridge starts, it never gets to print a Node stack trace about it.
    ``flags`` name the host and the port to the user (``--host``, ``--port``)."""
    shown_host = host or "127.0.0.1"
    if host is not None and host != "localhost":
        try:
            loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigurationError(
                f"{flags[0]} {host}: the bridge listens on loopback only (127.0.0.1, ::1 or "
                "localhost); its clients run on this machine"
            )
    if not port:
        return
    try:
        info = socket.getaddrinfo(shown_host, port, type=socket.SOCK_STREAM)
        with socket.socket(info[0][0], socket.SOCK_STREAM) as probe:
            # As Node listens: a port left in TIME_WAIT is free to it.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(info[0][4])
    except OSError as error:
        fix = {
            errno.EADDRINUSE: (
                f"another process holds the port; stop it or choose another {flags[1]}"
            ),
            errno.EACCES: f"this user may not bind that port; choose {flags[1]} 1024 or above",
        }.get(error.errno or 0, f"check {flags[0]}")
        raise ConfigurationError(
            f"cannot listen on {shown_host}:{port} ({error.strerror or error}): {fix}"
        ) from None


#: A line of a Node stack trace (``    at main (file:///...)``): the bridge prints them
#: under an error it also says in one line, so they are not passed on.
NODE_STACK_FRAME = re.compile(r"^\s+at \S")


class WithoutStackFrames:
    """Passes the bridge's stderr lines on to ``target``, less Node's stack frames."""

    def __init__(self, target: Echo) -> None:
        self._target = target

    def write(self, line: str) -> int:
        if NODE_STACK_FRAME.match(line):
            return len(line)
        return self._target.write(line)

    def flush(self) -> None:
        self._target.flush()


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
    store_ca_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> BridgeProcess:
    """Start the bridge against the store server at ``store_url`` and wait until ready.

    ``workspace`` is the bridge's default ``cwd`` for agent operations that name none.
    ``env`` adds to (or overrides) the inherited environment, e.g. ``CURSOR_BACKEND_URL``;
    ``echo`` receives the bridge's stderr lines, ready line included. ``command``
    replaces the installed launcher; ``extra_args`` go after the client's own flags.
    ``store_ca_file``: the PEM CA certificate(s) that signed an ``https://`` store's
    certificate, which the bridge then trusts (as ``NODE_EXTRA_CA_CERTS``).
    """
    store_url = server_url(store_url)
    check_address(host, port, ("host", "port"))
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
    bundle: Path | None = None
    if store_ca_file is not None:
        env, bundle = node_trust(store_ca_file, env)
    try:
        process, pump, ready = start(
            argv,
            bridge_environment(env),
            BRIDGE_READY_PREFIX,
            None if echo is None else WithoutStackFrames(echo),
            timeout,
            "cursor-sdk-bridge",
            STOP_TIMEOUT_SECONDS,
        )
    except BaseException:
        remove_bundle(bundle)
        raise
    try:
        url, token = bridge_endpoint(ready)
    except BaseException as error:
        stop(process, pump, STOP_TIMEOUT_SECONDS)
        _remove_token_file(ready.get("authTokenFile"))
        remove_bundle(bundle)
        if isinstance(error, ConfigurationError):
            raise ConfigurationError(
                f"cursor-sdk-bridge announced an unusable endpoint: {error}"
            ) from None
        raise
    return BridgeProcess(
        process=process,
        ready=ready,
        pump=pump,
        url=url,
        auth_token=token,
        store_url=store_url,
        ca_bundle=bundle,
    )
