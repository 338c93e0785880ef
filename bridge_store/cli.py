"""The ``bridge-store`` command line: ``serve``, ``bridge``, ``db upgrade`` and ``db current``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from types import FrameType
from typing import Any

import uvicorn

from ._compression import DEFAULT_COMPRESS_MIN_BYTES
from .client import BRIDGE_BIN_ENV, bridge_main
from .config import DEFAULT_MAX_REQUEST_BYTES, READY_PREFIX, ServerConfig
from .errors import ConfigurationError
from .plugins import get_plugin_manager
from .routing import Routes, resolve
from .tokens import TOKEN_ENV, load_or_generate
from .urls import redact

STORE_ENV = "BRIDGE_STORE_URL"
DEFAULT_STORE_URL = "sqlite:///bridge-store.db"
DEFAULT_PORT = 8787
#: How long in-flight requests may take to finish after SIGTERM/SIGINT.
GRACEFUL_SHUTDOWN_SECONDS = 30


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bridge-store",
        description=(
            "A storage server for Cursor SDK bridge agent history. Launch the bridge with "
            '--store-callback-url pointing here and --local-store \'{"type":"custom"}\'.'
        ),
    )
    parser.add_argument("--version", action="version", version=version("bridge-store"))
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve the CallStore RPC",
        description=(
            "Serve sdk.v1.SdkStoreCallbackService/CallStore over HTTP (Connect protocol). "
            "Prints 'bridge-store ready {JSON}' on stderr once listening."
        ),
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port to listen on; 0 picks a free one (default: %(default)s)",
    )
    _add_store_arguments(serve)
    serve.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=(
            f"read the bearer token from PATH, or generate one into PATH (mode 0600) if it "
            f"does not exist. Env {TOKEN_ENV} takes precedence. With neither, a new token is "
            f"written to ./bridge-store.token"
        ),
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="N",
        help="largest request body accepted, after decompression (default: %(default)s)",
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
    serve.add_argument("--access-log", action="store_true", help="log every request")

    bridge = commands.add_parser(
        "bridge",
        help="run the real cursor-sdk-bridge with its agent store on bridge-store",
        description=(
            "Run cursor-sdk-bridge (from the cursor-sdk package, extra 'client') in the "
            "foreground with its agent store on bridge-store: an embedded store server on a "
            "free loopback port (configured like serve's, by the flags below or the same "
            "environment variables), or a running one given --store-callback-url. Prints the "
            "bridge's discovery JSON as one line on stdout; its 'cursor-sdk-bridge ready "
            "{JSON}' line and all other stderr pass through. SIGTERM or SIGINT stops the "
            "bridge, then the store."
        ),
    )
    _add_store_arguments(bridge, "embedded store")
    existing = bridge.add_argument_group("existing store")
    existing.add_argument(
        "--store-callback-url",
        metavar="URL",
        help="use the bridge-store server at URL instead of an embedded one",
    )
    existing.add_argument(
        "--store-auth-token-file",
        metavar="PATH",
        help=f"file holding that server's bearer token (env {TOKEN_ENV} takes precedence)",
    )
    # The names before the embedded store existed.
    existing.add_argument("--store-url", dest="store_callback_url", help=argparse.SUPPRESS)
    existing.add_argument("--auth-token-file", dest="store_auth_token_file", help=argparse.SUPPRESS)
    options = bridge.add_argument_group("the bridge")
    options.add_argument(
        "--bridge-bin",
        metavar="PATH",
        help=(
            f"the cursor-sdk-bridge launcher to run (default: env {BRIDGE_BIN_ENV}, else the "
            "one in the installed cursor-sdk)"
        ),
    )
    options.add_argument(
        "--host", help="loopback address the bridge listens on (the bridge refuses others)"
    )
    options.add_argument("--port", type=int, help="port the bridge listens on (default: any free)")
    options.add_argument("--workspace", metavar="DIR", help="the agents' working directory")
    options.add_argument("--state-root", metavar="DIR", help="the bridge's own state directory")
    options.add_argument("--verbose", action="store_true", help="the bridge logs every RPC")
    options.add_argument(
        "bridge_args",
        nargs="*",
        metavar="-- BRIDGE_ARG",
        help="after '--': more cursor-sdk-bridge options, e.g. -- --max-concurrent-agents 4",
    )

    db = commands.add_parser("db", help="manage SQL schemas", description="Manage SQL schemas.")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    upgrade = db_commands.add_parser(
        "upgrade", help="upgrade every configured store to the latest schema"
    )
    _add_store_arguments(upgrade)
    current = db_commands.add_parser(
        "current", help="show the schema revision of every configured store"
    )
    _add_store_arguments(current)
    return parser


#: Environment variables for the storage flags, read when the flag is not given.
STORE_FLAG_ENV = {
    "store": STORE_ENV,
    "agents": "BRIDGE_STORE_AGENTS_URL",
    "runs": "BRIDGE_STORE_RUNS_URL",
    "run_events": "BRIDGE_STORE_RUN_EVENTS_URL",
    "checkpoints": "BRIDGE_STORE_CHECKPOINTS_URL",
}


def _add_store_arguments(parser: argparse.ArgumentParser, title: str = "storage") -> None:
    group = parser.add_argument_group(
        title,
        "Store URLs: sqlite:///PATH, memory://, postgresql://..., redis://..., s3://BUCKET/PREFIX, "
        "or any scheme an installed plugin serves. Each substore can go to its own URL. A flag "
        "not given is read from its environment variable.",
    )
    group.add_argument(
        "--store",
        metavar="URL",
        help=(
            f"URL for every substore (env {STORE_ENV}; "
            "default: a SQLite file in the current directory)"
        ),
    )
    for flag, name in (
        ("--agents", "agents"),
        ("--runs", "runs"),
        ("--run-events", "runEvents"),
        ("--checkpoints", "checkpoints"),
    ):
        env = STORE_FLAG_ENV[flag.removeprefix("--").replace("-", "_")]
        group.add_argument(
            flag, metavar="URL", help=f"URL for the {name} substore (env {env}; default: --store)"
        )


def store_urls(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """Each storage flag's URL: the flag, else its environment variable, else None."""
    environ = os.environ if environ is None else environ
    return {
        name: getattr(args, name) or environ.get(env) or None
        for name, env in STORE_FLAG_ENV.items()
    }


def routes_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Routes:
    urls = store_urls(args, environ)
    store = urls["store"] or DEFAULT_STORE_URL
    return Routes(
        agents=urls["agents"] or store,
        runs=urls["runs"] or store,
        run_events=urls["run_events"] or store,
        checkpoints=urls["checkpoints"] or store,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "bridge":
            return bridge(args)
        return asyncio.run(_db(args))
    except ConfigurationError as error:
        print(f"bridge-store: {error}", file=sys.stderr)
        return 2


# -- bridge ---------------------------------------------------------------------------


def bridge(args: argparse.Namespace) -> int:
    # Only flags given here go to the embedded store; it reads the environment itself.
    given = {name: getattr(args, name) for name in STORE_FLAG_ENV}
    if args.store_callback_url is not None and any(given.values()):
        raise ConfigurationError(
            "--store and the substore flags configure an embedded store; "
            "--store-callback-url uses a running one"
        )
    return bridge_main(
        **given,
        store_callback_url=args.store_callback_url,
        store_auth_token_file=args.store_auth_token_file,
        bridge_command=[args.bridge_bin] if args.bridge_bin else None,
        bridge_args=args.bridge_args,
        host=args.host,
        port=args.port,
        workspace=args.workspace,
        state_root=args.state_root,
        verbose=args.verbose,
    )


# -- serve ----------------------------------------------------------------------------


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints the ready line once it is accepting connections."""

    def __init__(self, config: uvicorn.Config, ready: dict[str, str]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(READY_PREFIX + json.dumps(self._ready), file=sys.stderr, flush=True)


def serve(args: argparse.Namespace) -> int:
    from .app import create_app  # Starlette and the app load only for serve.

    routes = routes_from(args)
    # Resolving finds bad URLs and missing extras before anything listens.
    resolve(get_plugin_manager(), routes)
    if args.max_request_bytes < 1:
        raise ConfigurationError("--max-request-bytes must be positive")
    if args.gzip_min_bytes < 0:
        raise ConfigurationError("--gzip-min-bytes must not be negative")
    token = load_or_generate(args.auth_token_file, dict(os.environ))
    config = ServerConfig(
        routes=routes,
        auth_token=token.value,
        max_request_bytes=args.max_request_bytes,
        migrate=args.migrate,
        compress_min_bytes=args.gzip_min_bytes,
    )
    listener = _listen(args.host, args.port)
    host, port = listener.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    ready = {"url": f"http://{shown_host}:{port}/"}
    if token.generated_file is not None:
        ready["authTokenFile"] = str(token.generated_file)
    server = _AnnouncingServer(
        uvicorn.Config(
            create_app(config),
            log_level=args.log_level,
            access_log=args.access_log,
            **UVICORN_SETTINGS,
        ),
        ready,
    )
    # uvicorn re-raises the stop signal after its graceful shutdown, under whatever
    # handler was installed before it started; handlers that just return make a
    # completed graceful stop exit 0, as process supervisors expect.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, _stopped)
    server.run(sockets=[listener])
    return 0 if server.started else 1


#: uvicorn settings of ``serve`` besides logging (the bench's ceiling runs on them too).
UVICORN_SETTINGS: dict[str, Any] = {
    "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS,
    "lifespan": "on",
    # Client addresses only ever reach the access log, so X-Forwarded-For is not worth
    # uvicorn's middleware on every call (~2% of the CPU of a small one).
    "proxy_headers": False,
}


def _stopped(signum: int, frame: FrameType | None) -> None:
    """Runs only after uvicorn has shut down; the process then exits normally."""


def _listen(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port must be between 0 and 65535, not {port}")
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = info[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {error}") from None
    return listener


# -- db -------------------------------------------------------------------------------


async def _db(args: argparse.Namespace) -> int:
    manager = get_plugin_manager()
    backends, _ = resolve(manager, routes_from(args))
    for url, backend in backends.items():
        await backend.start(migrate=False)
        try:
            if args.db_command == "upgrade":
                await backend.upgrade_schema()
                revision = await backend.schema_revision()
                print(f"{redact(url)}: upgraded to {revision or '(no schema)'}")
            else:
                revision = await backend.schema_revision()
                print(f"{redact(url)}: {revision or '(no schema)'}")
        finally:
            await backend.close()
    return 0
