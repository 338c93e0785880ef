"""A bridge and its store started together: :func:`launch` and its :class:`Session`."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigurationError
from ..security.tokens import read_token_file
from ._process import START_TIMEOUT_SECONDS, ReadyProcess
from .bridge import (
    LOCAL_STORE,
    STOP_TIMEOUT_SECONDS,
    BridgeProcess,
    bridge_path,
    check_address,
    launch_bridge,
    local_options,
)
from .offline_api import API_KEY as OFFLINE_API_KEY
from .offline_api import BACKEND_URL_ENV, OfflineCursorApi
from .store import Sidecar, check_store, start_sidecar
from .viewer_access import embedded_token_file, token_from_file
from .workspace import bridge_workspace, rules_from

if TYPE_CHECKING:
    import cursor_sdk

    from ..workspaces.paths import Checkout


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
        store_ca_file: str | os.PathLike[str] | None = None,
        auth_token_file: Path | None = None,
        offline_api: OfflineCursorApi | None = None,
        checkout: Checkout | None = None,
    ) -> None:
        self.bridge = bridge
        #: The offline stand-in for the Cursor API the bridge talks to, if offline.
        self.offline_api = offline_api
        #: The store server this session started, or None when it uses an existing one.
        self.sidecar = sidecar
        self.store_url = store_url
        self.store_auth_token = store_auth_token
        #: The file holding the store's token (absolute), if it is kept in one: sign in
        #: to the viewer with its contents.
        self.auth_token_file = auth_token_file
        self.store_ca_file = store_ca_file
        self.workspace = workspace
        #: The checkout of a workspace the bridge works in (None: its agents keep
        #: their paths), docs/team.md.
        self.checkout = checkout
        self._lock = threading.Lock()
        self._closing = False
        self._closed = False
        self._failure: str | None = None
        self._ended = threading.Event()
        watched: list[tuple[str, ReadyProcess]] = [("cursor-sdk-bridge", bridge)]
        if sidecar is not None:
            watched.append(("the store server", sidecar))
        for what, child in watched:
            threading.Thread(target=self._watch, args=(what, child), daemon=True).start()

    def _watch(self, what: str, child: ReadyProcess) -> None:
        status = child.wait()
        with self._lock:
            closing = self._closing
        if not closing:
            message = child.ended(what, status, "while the session was open")
            with self._lock:
                if not self._closing and self._failure is None:
                    self._failure = message
        self._ended.set()

    @property
    def viewer_url(self) -> str | None:
        """The history viewer of the store this session started (its ready line's
        ``viewerUrl``); None for an existing store, whose owner knows where its viewer is."""
        if self.sidecar is None:
            return None
        url = self.sidecar.ready.get("viewerUrl")
        return url if isinstance(url, str) else None

    @property
    def local(self) -> dict[str, Any]:
        """The ``local`` agent options: the workspace as ``cwd``, the custom store."""
        return local_options(self.workspace)

    def agent_options(self, **options: Any) -> dict[str, Any]:
        """Agent options (``model``, ``api_key`` ...) with ``local`` set for the store.

        A ``local`` given here is kept, but its ``store`` is always the custom one.
        Offline, ``api_key`` defaults to one the stand-in takes (any would do).
        """
        if self.offline_api is not None:
            options.setdefault("api_key", OFFLINE_API_KEY)
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
        """Stop the bridge, then the store if this session started it (and the offline
        Cursor API). Idempotent."""
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
                if self.offline_api is not None:
                    self.offline_api.close()

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
                    check_store(self.store_url, self.store_auth_token, ca_file=self.store_ca_file)
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
    auth_token_file: str | os.PathLike[str] | None = None,
    store_ca_file: str | os.PathLike[str] | None = None,
    bridge_command: Sequence[str] | None = None,
    bridge_args: Sequence[str] = (),
    host: str | None = None,
    port: int | None = None,
    state_root: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
    offline: bool = False,
    store_port: int = 0,
    workspace_rules: Sequence[str | tuple[str, str]] = (),
) -> Session:
    """Start a store server and the bridge on it; returns the running :class:`Session`.

    ``store`` (and the per-substore URLs) configure an embedded ``bridge-store serve``
    on a free loopback port, like serve's flags; what is not given comes from serve's
    environment (``BRIDGE_STORE_URL`` ...) or its default, ``./bridge-store.db``. Its
    viewer is at ``session.viewer_url``; its token is ``auth_token``, else the one in
    ``auth_token_file`` (created 0600 if missing), else the one beside the agents'
    SQLite database (``agents.db`` -> ``agents.token``, created likewise), else a fresh
    one kept in memory (:mod:`.viewer_access`). ``session.auth_token_file`` names the
    file. With ``store_url`` and ``auth_token`` (or ``auth_token_file``) the bridge
    uses that running store instead, after one CallStore call has shown it reachable
    and accepting the token; for an ``https://`` store whose certificate a private CA
    signed, ``store_ca_file`` (PEM) is trusted by that check and by the bridge
    (``NODE_EXTRA_CA_CERTS``).

    ``workspace`` (default: the current directory) is the bridge's default ``cwd``.
    When it is in a git checkout with an ``origin`` remote, or matches one of
    ``workspace_rules`` (``PATTERN=NAME``, before ``$BRIDGE_STORE_WORKSPACE_RULES``),
    the bridge shares its agents with every checkout of that workspace in its tenant
    (docs/team.md); ``session.checkout`` says which.
    ``bridge_command`` replaces the launcher (default ``$CURSOR_SDK_BRIDGE_BIN``, else
    the one in the installed ``cursor-sdk``); ``bridge_args`` are added to its command
    line. ``env`` adds to what both children inherit (store secrets never reach the
    bridge); ``echo`` receives both children's stderr lines. ``store_port`` pins the
    embedded store's port (default: a free one).

    ``offline`` points the bridge at an offline stand-in for the Cursor API
    (:mod:`.offline_api`, on a loopback port, stopped with the session): agents are
    created, kept, listed, resumed and deleted with no key and no network, and every
    run ends at once with status ``error`` and an error saying no model runs offline.
    """
    workspace = os.fspath(workspace if workspace is not None else os.getcwd())
    rules = rules_from(workspace_rules)
    command = list(bridge_command) if bridge_command is not None else [bridge_path()]
    # Before anything starts: an address the bridge would refuse is one line now.
    check_address(host, port, ("host", "port"))
    sidecar: Sidecar | None = None
    if auth_token is not None and auth_token_file is not None:
        raise ConfigurationError("give the store's token as auth_token or auth_token_file")
    token_file = Path(auth_token_file).absolute() if auth_token_file is not None else None
    if store_url is not None:
        if token_file is not None:
            auth_token = read_token_file(token_file)
        if auth_token is None:
            raise ConfigurationError(
                "an existing store (store_url) needs its auth_token or auth_token_file"
            )
        embedded = (store, agents, runs, run_events, checkpoints)
        if any(url is not None for url in embedded) or store_port:
            raise ConfigurationError(
                "store URLs and store_port configure an embedded store, not store_url"
            )
        check_store(store_url, auth_token, ca_file=store_ca_file)
        token = auth_token
    else:
        if store_ca_file is not None:
            raise ConfigurationError("store_ca_file is for an existing store (store_url)")
        if auth_token is None and token_file is None:
            beside = embedded_token_file(store, agents, {**os.environ, **(env or {})})
            token_file = beside.absolute() if beside is not None else None
        unsaved: ConfigurationError | None = None
        if token_file is not None:
            try:
                auth_token = token_from_file(token_file).value
            except ConfigurationError as problem:
                # A directory the token cannot be written to is one the store cannot
                # create its database in either, and the store's own error names that
                # fix; this one is raised if the store starts after all.
                unsaved = problem
        sidecar = start_sidecar(
            store,
            agents=agents,
            runs=runs,
            run_events=run_events,
            checkpoints=checkpoints,
            auth_token=auth_token,
            # The server reads the file too, and its viewer names it.
            auth_token_file=token_file if unsaved is None else None,
            port=store_port,
            env=env,
            echo=echo,
            timeout=timeout,
        )
        if unsaved is not None:
            sidecar.close()
            raise unsaved
        store_url, token = sidecar.url, sidecar.auth_token
    where = bridge_workspace(store_url, workspace, rules)
    workspace = where.directory
    offline_api = OfflineCursorApi().start() if offline else None
    if offline_api is not None:
        env = {**(env or {}), BACKEND_URL_ENV: offline_api.url}
    try:
        bridge = launch_bridge(
            where.store_url,
            token,
            command=command,
            host=host,
            port=port,
            workspace=workspace,
            state_root=state_root,
            verbose=verbose,
            extra_args=bridge_args,
            store_ca_file=store_ca_file,
            env=env,
            echo=echo,
            timeout=timeout,
        )
    except BaseException:
        if sidecar is not None:
            sidecar.close()
        if offline_api is not None:
            offline_api.close()
        raise
    return Session(
        bridge,
        sidecar,
        store_url=store_url,
        store_auth_token=token,
        workspace=workspace,
        store_ca_file=store_ca_file,
        auth_token_file=token_file,
        offline_api=offline_api,
        checkout=where.checkout,
    )
