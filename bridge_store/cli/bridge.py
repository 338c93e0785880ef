"""``bridge-store bridge``: the real bridge in the foreground, its store on bridge-store."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import TextIO

from ..client import BRIDGE_BIN_ENV, Session, launch
from ..client.bridge import check_address
from ..client.cursor_api import RUN_NEEDS, CursorApiLook, api_url
from ..client.viewer_access import embedded_token_file
from ..errors import ConfigurationError
from ..security.tokens import DEFAULT_TOKEN_FILE, TOKEN_ENV, read_auth_token
from ..urls import redact
from .shared.store_options import STORE_FLAG_ENV, add_store_arguments


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bridge = commands.add_parser(
        "bridge",
        help="run the real cursor-sdk-bridge with its agent store on bridge-store",
        description=(
            "Run cursor-sdk-bridge (from the cursor-sdk package, extra 'client') in the "
            "foreground with its agent store on bridge-store: an embedded store server on a "
            "free loopback port (configured like serve's, by the flags below or the same "
            "environment variables), or a running one given --store-callback-url. Prints the "
            "bridge's discovery JSON as one line on stdout. On stderr: the bridge's own "
            "output ('cursor-sdk-bridge ready {JSON}' and the rest), and a line naming the "
            "embedded store's history viewer and the file holding its token. SIGTERM or "
            "SIGINT stops the bridge, then the store. Agents and runs need a Cursor API key "
            "(CURSOR_API_KEY) and the Cursor API, which is looked for once at start (a line "
            "says when it cannot be reached); --offline needs neither."
        ),
    )
    add_store_arguments(bridge, "embedded store")
    bridge.add_argument(
        "--store-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the embedded store's loopback port (default: any free one)",
    )
    bridge.add_argument(
        "--auth-token-file",
        metavar="PATH",
        help=(
            f"the embedded store's token (to sign in to its viewer): read from PATH, or "
            f"generated into PATH (mode 0600) if it does not exist. Env {TOKEN_ENV} takes "
            f"precedence. Default: beside the agents' SQLite database (agents.db -> "
            f"agents.token), else ./{DEFAULT_TOKEN_FILE}"
        ),
    )
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
    existing.add_argument(
        "--store-ca-file",
        metavar="PATH",
        help=(
            "PEM CA certificate(s) that signed an https:// server's certificate; the store "
            "check and the bridge (as NODE_EXTRA_CA_CERTS) trust them"
        ),
    )
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
        "--host",
        help="loopback address the bridge listens on; it refuses others (default: the bridge's)",
    )
    options.add_argument("--port", type=int, help="port the bridge listens on (default: any free)")
    options.add_argument(
        "--workspace",
        metavar="DIR",
        help="the agents' working directory (default: the current directory)",
    )
    options.add_argument(
        "--workspace-rule",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help=(
            "a directory matching PATTERN (or under one) is in workspace NAME, before its "
            "git origin remote names one (docs/team.md)"
        ),
    )
    options.add_argument(
        "--state-root",
        metavar="DIR",
        help="the bridge's own state directory (default: the bridge's)",
    )
    options.add_argument("--verbose", action="store_true", help="the bridge logs every RPC")
    options.add_argument(
        "--offline",
        action="store_true",
        help=(
            "no Cursor API key, no network: the bridge talks to bridge-store's offline "
            "stand-in for the Cursor API (on a loopback port), so agents are created, kept, "
            "listed, resumed and deleted, and every run ends at once with an error saying "
            "no model runs offline"
        ),
    )
    options.add_argument(
        "bridge_args",
        nargs="*",
        metavar="-- BRIDGE_ARG",
        help="after '--': more cursor-sdk-bridge options, e.g. -- --max-concurrent-agents 4",
    )


def run(args: argparse.Namespace) -> int:
    # Only flags given here go to the embedded store; it reads the environment itself.
    given = {name: getattr(args, name) for name in STORE_FLAG_ENV}
    if args.store_callback_url is not None and (any(given.values()) or args.store_port):
        raise ConfigurationError(
            "--store, --store-port and the substore flags configure an embedded store; "
            "--store-callback-url uses a running one"
        )
    return bridge_main(
        **given,
        auth_token_file=args.auth_token_file,
        store_callback_url=args.store_callback_url,
        store_auth_token_file=args.store_auth_token_file,
        store_ca_file=args.store_ca_file,
        bridge_command=[args.bridge_bin] if args.bridge_bin else None,
        bridge_args=args.bridge_args,
        host=args.host,
        port=args.port,
        workspace=args.workspace,
        workspace_rules=args.workspace_rule,
        state_root=args.state_root,
        verbose=args.verbose,
        offline=args.offline,
        store_port=args.store_port,
    )


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
    auth_token_file: str | None = None,
    store_callback_url: str | None = None,
    store_auth_token_file: str | None = None,
    store_ca_file: str | None = None,
    bridge_command: Sequence[str] | None = None,
    bridge_args: Sequence[str] = (),
    host: str | None = None,
    port: int | None = None,
    workspace: str | None = None,
    workspace_rules: Sequence[str] = (),
    state_root: str | None = None,
    verbose: bool = False,
    offline: bool = False,
    store_port: int = 0,
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
    # Addresses the bridge or the store could not listen on: one line, nothing started.
    check_address(host, port, ("--host", "--port"))
    check_address(None, store_port, ("--host", "--store-port"))
    # The Cursor API is looked for while the pair starts (offline, there is none).
    api_look = None if offline else CursorApiLook(api_url(environ))
    token: str | None = None
    token_file: str | None = None
    if store_callback_url is not None:
        if auth_token_file is not None:
            raise ConfigurationError(
                "--auth-token-file is the embedded store's; a running store's token is "
                "--store-auth-token-file"
            )
        token = read_auth_token(store_auth_token_file, environ)
    else:
        for flag, value in (
            ("--store-auth-token-file", store_auth_token_file),
            ("--store-ca-file", store_ca_file),
        ):
            if value is not None:
                raise ConfigurationError(f"{flag} goes with --store-callback-url")
        # serve's rule, so the store's viewer can be signed in to: the environment's
        # token, else a file (see bridge_store.client.viewer_access).
        token = environ.get(TOKEN_ENV, "").strip() or None
        if token is None:
            beside = embedded_token_file(store, agents, environ)
            token_file = auth_token_file or (str(beside) if beside else DEFAULT_TOKEN_FILE)
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
            auth_token_file=token_file,
            store_ca_file=store_ca_file,
            workspace=workspace,
            workspace_rules=workspace_rules,
            bridge_command=bridge_command,
            bridge_args=bridge_args,
            host=host,
            port=port,
            state_root=state_root,
            verbose=verbose,
            echo=sys.stderr,
            offline=offline,
            store_port=store_port,
        )
        stop.armed = True
        if stop.requested:
            return 0
        print(json.dumps(session.bridge.ready, separators=(",", ":")), file=stdout, flush=True)
        if session.viewer_url is not None:
            print(f"bridge-store: {viewer_line(session)}", file=sys.stderr, flush=True)
        if offline:
            print(f"bridge-store: {OFFLINE_LINE}", file=sys.stderr, flush=True)
        elif api_look is not None and (reason := api_look.reason()) is not None:
            line = f"cannot reach the Cursor API at {redact(api_look.url)} ({reason}): {RUN_NEEDS}"
            print(f"bridge-store: {line}", file=sys.stderr, flush=True)
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


#: What --offline means, said once the bridge is up.
OFFLINE_LINE = (
    "offline: the bridge talks to bridge-store's stand-in for the Cursor API; agents are "
    "kept in the store, and every run ends at once with an error saying no model runs "
    "offline"
)


def viewer_line(session: Session) -> str:
    """Where the embedded store's history can be seen while the bridge runs; names the
    token's file or variable, never the token."""
    where = f"the token in {session.auth_token_file}"
    if session.auth_token_file is None:
        where = f"the token in ${TOKEN_ENV}"
    return f"history viewer at {session.viewer_url} (sign in with {where})"
