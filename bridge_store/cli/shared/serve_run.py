"""Serving the CallStore server from serve's options under uvicorn, announced by a ready
line: what ``serve`` does, and ``demo`` once its store is filled."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...config import ServerConfig
from ...errors import ConfigurationError
from ...security.auth import TokenRegistry
from ...security.tokens import DEFAULT_TOKEN_FILE, TOKEN_ENV, load_or_generate
from ...security.tokens_file import TOKENS_FILE_ENV, open_registry
from ...stores import ResolvedStores, Routes, StoreStack
from ...substores import BackendOptions
from ...viewer import UI_PATH
from ...viewer.welcome import BridgeHint
from ...wire.http_limits import HttpLimits, connection_cap, raise_open_file_limit
from .price_options import prices_from
from .program import this_program
from .serve_options import export_from, retention_from
from .store_options import keyring_from, routes_from
from .tls import uvicorn_tls

if TYPE_CHECKING:
    from ...ops.tracing import Tracing
    from ...pricing.book import PriceBook
    from ...viewer.session_keys import SessionKeys


def serve(
    args: argparse.Namespace, environ: Mapping[str, str], *, sign_in_file: Path | None = None
) -> int:
    """Serve as serve's options ``args`` say, with the environment ``environ``; the exit
    status. ``sign_in_file`` names, as the ready line's ``authTokenFile``, a file whose
    token signs in (serve names the token file it generated)."""
    # uvicorn, Starlette, the app and its metrics load only for serve.
    import logging.config

    from ...ops.logs import logging_config
    from ...ops.tracing import tracing_from_environment
    from .serving import listen
    from .workers import check_workers

    # First: whatever start-up logs goes out in the chosen format.
    logging.config.dictConfig(logging_config(args.log_format, args.log_level))
    tracing = tracing_from_environment(os.environ)
    if tracing is not None:
        # Before any backend creates its engine or client: the instrumentations wrap
        # their constructors.
        tracing.instrument()

    routes = routes_from(args)
    prices = prices_from(args)  # a bad price table stops the start, in one line
    export_from(args, environ)  # so does a bad --export-runs URL
    if not (math.isfinite(args.backend_timeout) and args.backend_timeout > 0):
        raise ConfigurationError(
            f"--backend-timeout must be a positive number of seconds, not {args.backend_timeout}"
        )
    options = BackendOptions(timeout=args.backend_timeout)
    # Bad URLs and missing extras are found before a token is written or a port opened.
    resolved = StoreStack.of(routes, options).resolved
    tls = uvicorn_tls(args)
    if args.max_connections < 1:
        raise ConfigurationError("--max-connections must be positive")
    check_workers(args.workers, routes)
    limits = HttpLimits(
        max_connections=connection_cap(args.max_connections, raise_open_file_limit())
    )
    # The port first: a server that cannot listen (another one holds the port) must
    # not have written anything, least of all a token its clients would then lack.
    listener = listen(args.host, args.port)
    # What the server creates is its owner's alone: the token file, and a SQLite file
    # (with its -wal and -shm), which holds every agent's blobEncryptionKey. Restored
    # on the way out, for a caller that runs serve in its own process.
    serving = _Serving(
        args, environ, listener, routes, options, limits, tls, tracing, prices, sign_in_file
    )
    umask = os.umask(0o077)
    try:
        if args.workers > 1:
            return _serve_workers(serving)
        return _serve_on(serving, resolved)
    finally:
        os.umask(umask)
        listener.close()  # uvicorn has closed it after serving; not if the start failed
        if tracing is not None:
            tracing.shutdown()  # sends the spans still buffered


@dataclass(frozen=True, slots=True)
class _Serving:
    """What every server process of one start shares, settled before any of them runs."""

    args: argparse.Namespace
    environ: Mapping[str, str]
    listener: socket.socket
    routes: Routes
    options: BackendOptions
    limits: HttpLimits
    tls: dict[str, Any]
    tracing: Tracing | None
    prices: PriceBook
    sign_in_file: Path | None

    def ready(self, generated_token_file: Path | None) -> dict[str, str]:
        """The ready line's fields: where to connect, and the token file made, if one
        was (else the file named to sign in with, if one was)."""
        host, port = self.listener.getsockname()[:2]
        shown_host = f"[{host}]" if ":" in host else host
        scheme = "https" if self.tls else "http"
        ready = {"url": f"{scheme}://{shown_host}:{port}/", "version": __version__}
        if self.args.ui:
            # The viewer is the first thing a person wants to open; the URL says where.
            ready["viewerUrl"] = f"{ready['url']}{UI_PATH.strip('/')}/"
        token_file = generated_token_file or self.sign_in_file
        if token_file is not None:
            ready["authTokenFile"] = str(token_file)
        return ready


def _serve_workers(serving: _Serving) -> int:
    """``--workers N``: the token first (every worker reads the one generated now) and
    the viewer's session keys (every worker accepts every session), then N processes,
    each resolving its own backends (cli/shared/workers.py)."""
    from ...viewer.session_keys import SessionKeys
    from .workers import serve_workers

    _, generated_token_file = _token_registry(serving.args, serving.environ)
    session_keys = SessionKeys.new(across_forks=True) if serving.args.ui else None

    def worker(announce: Callable[[], None]) -> int:
        # In the worker's own process: its own engines and clients, opened on its loop.
        resolved = StoreStack.of(serving.routes, serving.options).resolved
        try:
            return _serve_on(serving, resolved, announce, session_keys)
        finally:
            if serving.tracing is not None:
                serving.tracing.shutdown()  # the worker's own buffered spans

    return serve_workers(serving.args.workers, worker, serving.ready(generated_token_file))


def _serve_on(
    serving: _Serving,
    resolved: ResolvedStores,
    announce: Callable[[], None] | None = None,
    session_keys: SessionKeys | None = None,
) -> int:
    import uvicorn

    from ...app import create_app
    from ...wire.hsts import StrictTransportSecurity
    from ...wire.http_guard import guarded_protocol
    from .serving import UVICORN_SETTINGS, run_announcing

    args = serving.args
    registry, generated_token_file = _token_registry(args, serving.environ)
    config = ServerConfig(
        routes=serving.routes,
        tokens=registry,
        keyring=keyring_from(args),
        max_request_bytes=args.max_request_bytes,
        migrate=args.migrate,
        compress_min_bytes=args.gzip_min_bytes,
        metrics=args.metrics,
        metrics_public=args.metrics_public,
        access_log=args.access_log,
        ui=args.ui,
        prices=serving.prices,
        backend_timeout=serving.options.timeout,
        retain=retention_from(args),
        export_runs=export_from(args, serving.environ),
        bridge_hint=_bridge_hint(args, serving.environ),
        session_keys=session_keys,
    )
    app = create_app(config, resolved=resolved, tracing=serving.tracing)
    ready = serving.ready(generated_token_file)
    server_config = uvicorn.Config(
        StrictTransportSecurity(app) if serving.tls else app,
        # Logging is configured above; uvicorn only sets its loggers' levels.
        log_config=None,
        log_level=args.log_level,
        access_log=args.access_log,
        **{**UVICORN_SETTINGS, "http": guarded_protocol(serving.limits)},
        **serving.tls,
    )
    listener, prices = serving.listener, serving.prices
    # The files read again on SIGHUP: the tokens file, the price table.
    reloads = [one for one in (registry, prices) if one.path is not None]
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


def _token_registry(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[TokenRegistry, Path | None]:
    """The tokens serve accepts, and the token file it generated, if it did."""
    tokens_file = args.tokens_file or environ.get(TOKENS_FILE_ENV)
    if not tokens_file:
        token = load_or_generate(args.auth_token_file, dict(environ))
        return TokenRegistry.single(token.value), token.generated_file
    if args.auth_token_file or environ.get(TOKEN_ENV, "").strip():
        raise ConfigurationError(
            f"--tokens-file replaces the one-token shorthand: drop --auth-token-file "
            f"and {TOKEN_ENV}, or add that token to the tokens file"
        )
    return open_registry(Path(tokens_file)), None


def _bridge_hint(args: argparse.Namespace, environ: Mapping[str, str]) -> BridgeHint:
    """Where a bridge finds the token _token_registry chose (the viewer's empty page
    shows it): the tokens file, the environment, or the one token's file."""
    program = this_program(environ=environ)
    if args.tokens_file or environ.get(TOKENS_FILE_ENV):
        return BridgeHint(named_tokens=True, program=program)
    if environ.get(TOKEN_ENV, "").strip():
        return BridgeHint(token_env=True, program=program)
    token_file = str(Path(args.auth_token_file or DEFAULT_TOKEN_FILE).absolute())
    return BridgeHint(token_file=token_file, program=program)
