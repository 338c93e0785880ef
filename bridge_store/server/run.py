"""Serving a server under uvicorn by the rules ``bridge-store serve`` follows.

:func:`serve` takes a :class:`~.config.ServerConfig` and a :class:`~.config.ServingConfig`
and does what ``serve`` does with them, for the CLI and for an application that embeds
the server alike: the port bound before anything is written, files it creates readable
by their owner alone, HTTPS with HSTS, the HTTP guard's bounds on connections and
request heads, the ready line, ``--workers`` processes on one port, and SIGHUP reading
the tokens file and the price table again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

from .. import __version__
from ..backend.plugins import get_plugin_manager
from ..stack.stores import ResolvedStores, resolve
from ..viewer import UI_PATH
from ..wire.http_limits import HttpLimits, connection_cap, raise_open_file_limit
from .config import ServerConfig, ServingConfig
from .serving import listen
from .workers import check_workers

if TYPE_CHECKING:
    from ..ops.tracing import Tracing


def serve(
    config: ServerConfig,
    serving: ServingConfig,
    *,
    listener: socket.socket | None = None,
    resolved: ResolvedStores | None = None,
    plugin_manager: pluggy.PluginManager | None = None,
    tracing: Tracing | None = None,
    sign_in_file: Path | None = None,
) -> int:
    """Serve ``config`` as ``serving`` says until a stop signal; the exit status.

    ``listener``: the socket to serve on, already bound to ``serving``'s address (the
    CLI binds it before it writes a token file); by default bound here. ``resolved``:
    the backends of ``config.routes``, already resolved (by default resolved here with
    ``plugin_manager``, every installed backend); with several workers each resolves
    its own, for its own pools. ``tracing`` gives each call a span. ``sign_in_file``:
    the token file the ready line names (``authTokenFile``).
    """
    check_workers(serving.workers, config.routes)
    manager = plugin_manager if plugin_manager is not None else get_plugin_manager()
    if resolved is None and serving.workers == 1:
        # Bad URLs and missing extras are found before the port opens.
        resolved = resolve(manager, config.routes, config.backend_options())
    limits = HttpLimits(
        max_connections=connection_cap(serving.max_connections, raise_open_file_limit())
    )
    bound = listener if listener is not None else listen(serving.host, serving.port)
    ready = _ready_line(bound, serving, config, sign_in_file)
    # What the server creates is its owner's alone: a SQLite file (with its -wal and
    # -shm) holds every agent's blobEncryptionKey. Restored on the way out, for a
    # caller that serves in its own process.
    start = _Start(config, serving, limits, bound, ready, tracing)
    umask = os.umask(0o077)
    try:
        if serving.workers > 1:
            return _serve_workers(start, manager)
        assert resolved is not None  # resolved above with one worker
        return _serve_on(start, resolved)
    finally:
        os.umask(umask)
        bound.close()  # uvicorn has closed it after serving; not if the start failed


def _ready_line(
    listener: socket.socket, serving: ServingConfig, config: ServerConfig, token: Path | None
) -> dict[str, str]:
    """The ready line's fields: where to connect, and the token file to sign in with."""
    host, port = listener.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    scheme = "https" if serving.tls else "http"
    ready = {"url": f"{scheme}://{shown_host}:{port}/", "version": __version__}
    if config.ui:
        # The viewer is the first thing a person wants to open; the URL says where.
        ready["viewerUrl"] = f"{ready['url']}{UI_PATH.strip('/')}/"
    if token is not None:
        ready["authTokenFile"] = str(token)
    return ready


@dataclass(frozen=True, slots=True)
class _Start:
    """What every server process of one start shares, settled before any of them runs."""

    config: ServerConfig
    serving: ServingConfig
    limits: HttpLimits
    listener: socket.socket
    ready: dict[str, str]
    tracing: Tracing | None


def _serve_workers(start: _Start, manager: pluggy.PluginManager) -> int:
    """``--workers N``: the viewer's session keys first (every worker accepts every
    session), then N processes, each resolving its own backends (:mod:`.workers`)."""
    from ..viewer.session_keys import SessionKeys
    from .workers import serve_workers

    config = start.config
    if config.ui and config.session_keys is None:
        keys = SessionKeys.new(across_forks=True)
        start = replace(start, config=replace(config, session_keys=keys))

    def worker(announce: Callable[[], None]) -> int:
        # In the worker's own process: its own engines and clients, opened on its loop.
        resolved = resolve(manager, config.routes, config.backend_options())
        try:
            return _serve_on(start, resolved, announce)
        finally:
            if start.tracing is not None:
                start.tracing.shutdown()  # the worker's own buffered spans

    return serve_workers(start.serving.workers, worker, start.ready)


def _serve_on(
    start: _Start, resolved: ResolvedStores, announce: Callable[[], None] | None = None
) -> int:
    import uvicorn

    from ..wire.hsts import StrictTransportSecurity
    from ..wire.http_guard import guarded_protocol
    from .app import create_app
    from .serving import UVICORN_SETTINGS, run_announcing

    config, serving, listener, ready = start.config, start.serving, start.listener, start.ready
    app = create_app(config, resolved=resolved, tracing=start.tracing)
    server_config = uvicorn.Config(
        StrictTransportSecurity(app) if serving.tls else app,
        # Logging is the caller's to configure; uvicorn only sets its loggers' levels.
        log_config=None,
        log_level=serving.log_level,
        access_log=config.access_log,
        **{**UVICORN_SETTINGS, "http": guarded_protocol(start.limits)},
        **serving.tls,
    )
    registry, prices = app.server.tokens, config.prices
    # The files read again on SIGHUP: the tokens file, the price table.
    reloads = [one for one in (registry, prices) if one is not None and one.path is not None]
    if not reloads:
        return run_announcing(server_config, ready, listener, app.open_stores, announce)

    def reload_files() -> None:
        for one in reloads:
            one.request_reload()

    async def follow_files_then_open_stores() -> None:
        # From here SIGHUP is a callback of the loop that asks each file's reload task
        # for a reload; it never reads a file itself (see TokenRegistry, PriceBook).
        loop = asyncio.get_running_loop()
        registry.follow_on(loop, None)
        if prices is not None:
            prices.follow_on(loop)
        loop.add_signal_handler(signal.SIGHUP, reload_files)
        await app.open_stores()

    # Until the loop runs, a SIGHUP is remembered and served once it does.
    signal.signal(signal.SIGHUP, lambda signum, frame: reload_files())
    try:
        return run_announcing(
            server_config, ready, listener, follow_files_then_open_stores, announce
        )
    finally:
        # The closed loop put back the default action, which would kill a stopped
        # server that one more SIGHUP reaches while it exits.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
