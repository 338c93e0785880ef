"""``serve``'s options turned into the server's configuration, then served
(:func:`bridge_store.server.run.serve`): what ``serve`` does, and ``demo`` once its
store is filled. Only flags, the environment and ``--config`` are read here; the rules
of serving are the server's."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from ...backend.plugins import get_plugin_manager
from ...errors import ConfigurationError
from ...security.auth import TokenRegistry
from ...security.tokens import DEFAULT_TOKEN_FILE, TOKEN_ENV, load_or_generate
from ...security.tokens_file import TOKENS_FILE_ENV, open_registry
from ...server.config import ServerConfig, ServingConfig, backend_options
from ...stack.stores import resolve
from ...viewer.welcome import BridgeHint
from .price_options import prices_from
from .program import this_program
from .serve_options import export_from, retention_from
from .store_options import keyring_from, routes_from


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
    from ...server import run
    from ...server.serving import listen
    from ...server.workers import check_workers

    # First: whatever start-up logs goes out in the chosen format.
    logging.config.dictConfig(logging_config(args.log_format, args.log_level))
    tracing = tracing_from_environment(os.environ)
    if tracing is not None:
        # Before any backend creates its engine or client: the instrumentations wrap
        # their constructors.
        tracing.instrument()

    # Everything that can be wrong with the flags is found before a token is written
    # or a port opened: the stores (resolved once, here), the price table, the export
    # URL, the TLS files, the workers.
    routes = routes_from(args)
    prices = prices_from(args)
    export_runs = export_from(args, environ)
    options = backend_options(args.backend_timeout)
    # Several workers each resolve their own (their own pools): this is then the check.
    resolved = resolve(get_plugin_manager(), routes, options)
    serving = ServingConfig(
        host=args.host,
        port=args.port,
        workers=args.workers,
        max_connections=args.max_connections,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        ssl_ca_certs=args.ssl_ca_certs,
        log_level=args.log_level,
    )
    check_workers(serving.workers, routes)
    # The port first: a server that cannot listen (another one holds the port) must
    # not have written anything, least of all a token its clients would then lack.
    listener = listen(serving.host, serving.port)
    # The token file it generates is its owner's alone.
    umask = os.umask(0o077)
    try:
        registry, generated_token_file = _token_registry(args, environ)
        config = ServerConfig(
            routes=routes,
            tokens=registry,
            keyring=keyring_from(args),
            max_request_bytes=args.max_request_bytes,
            migrate=args.migrate,
            compress_min_bytes=args.gzip_min_bytes,
            metrics=args.metrics,
            metrics_public=args.metrics_public,
            access_log=args.access_log,
            ui=args.ui,
            prices=prices,
            backend_timeout=options.timeout,
            retain=retention_from(args),
            export_runs=export_runs,
            bridge_hint=_bridge_hint(args, environ),
        )
        return run.serve(
            config,
            serving,
            listener=listener,
            resolved=resolved if serving.workers == 1 else None,
            tracing=tracing,
            sign_in_file=generated_token_file or sign_in_file,
        )
    finally:
        os.umask(umask)
        listener.close()
        if tracing is not None:
            tracing.shutdown()  # sends the spans still buffered


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
