"""serve's options: ``serve`` runs with them, ``config show`` shows what they come to,
and they are the keys of serve's config file (:mod:`.settings`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from ...backend.substores import DEFAULT_BACKEND_TIMEOUT
from ...lifecycle.durations import age_text, describe_age, parse_age
from ...lifecycle.retain import DEFAULT_INTERVAL, RetentionSettings
from ...run_traces import EXPORT_RUNS_ENV, require_otel
from ...run_traces.settings import ExportSettings
from ...security.tokens import TOKEN_ENV
from ...security.tokens_file import TOKENS_FILE_ENV
from ...wire._compression import DEFAULT_COMPRESS_MIN_BYTES
from ...wire.http_limits import DEFAULT_MAX_REQUEST_BYTES, HttpLimits
from .price_options import add_prices_argument
from .settings import add_config_argument
from .store_options import KEY_FILE_USES, add_key_file_argument, add_store_arguments

DEFAULT_PORT = 8787


def add_listen_arguments(parser: argparse.ArgumentParser, default_port: int) -> None:
    """``--host`` and ``--port``, for serve and for ``ui`` (each with its own port)."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=default_port,
        help="port to listen on; 0 picks a free one (default: %(default)s)",
    )


def add_arguments(serve: argparse.ArgumentParser) -> None:
    """serve's options; ``config show`` takes the same, and they are the config file's keys."""
    add_config_argument(serve)
    add_listen_arguments(serve, DEFAULT_PORT)
    add_store_arguments(serve)
    serve.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=(
            f"read the bearer token (16 characters or more) from PATH, or generate one into "
            f"PATH (mode 0600) if it does not exist. Env {TOKEN_ENV} takes precedence. With "
            f"neither, ./bridge-store.token is used that way"
        ),
    )
    serve.add_argument(
        "--tokens-file",
        metavar="PATH",
        help=(
            f"named tokens with tenants and scopes (TOML, see 'bridge-store token add'), "
            f"re-read when it changes and on SIGHUP; instead of the one token of "
            f"--auth-token-file / {TOKEN_ENV}. Env {TOKENS_FILE_ENV}"
        ),
    )
    add_key_file_argument(serve, KEY_FILE_USES["serve"])
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="N",
        help="largest request body accepted, after decompression (default: %(default)s, 128 MiB)",
    )
    serve.add_argument(
        "--gzip-min-bytes",
        type=int,
        default=DEFAULT_COMPRESS_MIN_BYTES,
        metavar="N",
        help=(
            "gzip responses of at least N bytes for clients that accept it; 0 never "
            "compresses. On loopback or a fast LAN gzip costs more than it saves; lower "
            "it for stores reached over slow links (default: %(default)s)"
        ),
    )
    serve.add_argument(
        "--backend-timeout",
        type=float,
        default=DEFAULT_BACKEND_TIMEOUT,
        metavar="SECONDS",
        help=(
            "longest wait on a backend (connecting, a pooled connection, one statement, "
            "command or S3 request) before the call fails with 'unavailable'; a store "
            "URL's own timeout parameters override it (default: %(default)s)"
        ),
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=HttpLimits().max_connections,
        metavar="N",
        help=(
            "most client connections open at once; a connection beyond it is answered "
            "503 and closed at once. Lowered to fit the open-file limit, which serve "
            "raises to its hard limit (default: %(default)s)"
        ),
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help=(
            "serve from N processes on one port, each with its own backend pools, to use "
            "N cores; not with memory:// (default: %(default)s)"
        ),
    )
    serve.add_argument(
        "--no-migrate",
        dest="migrate",
        action="store_false",
        help="do not upgrade SQL schemas on start (run 'bridge-store db upgrade' instead)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="server log level (default: %(default)s)",
    )
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="log lines as text, or as one JSON object each for a log collector "
        "(default: %(default)s)",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="log a line per request; CallStore lines carry substore, method, code, "
        "duration_ms and request_id",
    )
    serve.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="do not serve Prometheus metrics on GET /metrics",
    )
    serve.add_argument(
        "--metrics-public",
        action="store_true",
        help="serve GET /metrics without the bearer token (for a scraper on a trusted network)",
    )
    serve.add_argument(
        "--no-ui", dest="ui", action="store_false", help="do not serve the history viewer at /ui/"
    )
    add_prices_argument(serve)
    add_retain_arguments(serve)
    serve.add_argument(
        "--export-runs",
        metavar="OTLP_URL",
        help=(
            "send each run, once it ends, to this OpenTelemetry collector (OTLP/HTTP) as "
            "a trace in the GenAI conventions; runs wait in the store while it is down, "
            "and of servers sharing a store one sends. Headers from "
            f"OTEL_EXPORTER_OTLP_HEADERS; see docs/observability.md (env {EXPORT_RUNS_ENV})"
        ),
    )
    add_tls_arguments(serve)


def add_retain_arguments(serve: argparse.ArgumentParser) -> None:
    """serve's ``--retain`` and ``--retain-every``: the prune, in the background."""
    serve.add_argument(
        "--retain",
        type=age_text,
        metavar="AGE",
        help=(
            "prune agents not updated for AGE (90d; s, m, h, d or w) in the background, "
            "as 'bridge-store prune --older-than AGE' does; of servers sharing a backend "
            "one prunes at a time (default: keep everything)"
        ),
    )
    serve.add_argument(
        "--retain-every",
        type=age_text,
        default=describe_age(DEFAULT_INTERVAL),
        metavar="AGE",
        help="how often --retain prunes, give or take 10%% (default: %(default)s)",
    )


def retention_from(args: argparse.Namespace) -> RetentionSettings | None:
    """serve's retention settings, None without ``--retain``."""
    if args.retain is None:
        return None
    return RetentionSettings(parse_age(args.retain), parse_age(args.retain_every))


def export_from(args: argparse.Namespace, environ: Mapping[str, str]) -> ExportSettings | None:
    """serve's live export settings, None without ``--export-runs`` (or its variable);
    a bad URL or a missing ``otel`` extra stops the start in one line."""
    url = args.export_runs or environ.get(EXPORT_RUNS_ENV, "").strip()
    if not url:
        return None
    require_otel("--export-runs")
    return ExportSettings.to(url)


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group(
        "TLS", "Serve HTTPS instead of HTTP; the ready line's URL then starts with https://."
    )
    tls.add_argument(
        "--ssl-certfile",
        metavar="PATH",
        help="PEM certificate chain to serve (the server's certificate first)",
    )
    tls.add_argument(
        "--ssl-keyfile",
        metavar="PATH",
        help="PEM private key of that certificate, unencrypted (default: read from --ssl-certfile)",
    )
    tls.add_argument(
        "--ssl-ca-certs",
        metavar="PATH",
        help="PEM CA certificates: require every client to present a certificate they signed",
    )
