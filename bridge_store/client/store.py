"""The store child: ``bridge-store serve`` on a free loopback port, and checking a store.

:func:`start_sidecar` starts a store server for the bridge to use and waits for its
ready line; :func:`check_store` makes sure a running one answers and takes a token
before a bridge is pointed at it.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ..errors import EXIT_UNREACHABLE, ConfigurationError
from ..reaching import server_url, unreachable
from ..security.tokens import TOKEN_ENV, new_token
from ..server.config import READY_PREFIX
from ..urls import redact
from ._process import START_TIMEOUT_SECONDS, ReadyProcess, start
from .trust import tls_context

#: The sidecar drains in-flight requests before it exits.
SIDECAR_STOP_TIMEOUT_SECONDS = 30.0
#: How long the store check before launching the bridge waits for an answer.
CHECK_TIMEOUT_SECONDS = 10.0
#: The agent the store check asks for; reading a missing agent changes nothing.
CHECK_AGENT_ID = "bridge-store-check"
_CALL_STORE_PATH = "sdk.v1.SdkStoreCallbackService/CallStore"


@dataclass(kw_only=True)
class Sidecar(ReadyProcess):
    """A ``bridge-store serve`` child process; a context manager that stops it on exit.

    Stopping sends SIGTERM: the server drains in-flight requests, then exits.
    """

    stop_timeout = SIDECAR_STOP_TIMEOUT_SECONDS

    url: str
    auth_token: str = field(repr=False)


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
    auth_token_file: os.PathLike[str] | str | None = None,
) -> Sidecar:
    """Start ``bridge-store serve`` for ``store`` (and per-substore URLs) on a free port.

    URLs not given come from serve's environment (``BRIDGE_STORE_URL`` ...) or its
    default. The token (a new random one unless given) reaches the server through its
    environment, never its command line, where other local users could read it; or,
    with ``auth_token_file`` (holding ``auth_token``), through that file.
    """
    args = ["--host", host, "--port", str(port), "--log-level", log_level]
    args += sidecar_args(
        store, agents=agents, runs=runs, run_events=run_events, checkpoints=checkpoints
    )
    if not migrate:
        args.append("--no-migrate")
    return start_serve(
        args,
        auth_token=auth_token,
        auth_token_file=auth_token_file,
        env=env,
        echo=echo,
        timeout=timeout,
    )


def start_serve(
    args: Sequence[str],
    *,
    auth_token: str | None = None,
    tokens_file: os.PathLike[str] | str | None = None,
    env: Mapping[str, str] | None = None,
    echo: TextIO | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
    auth_token_file: os.PathLike[str] | str | None = None,
) -> Sidecar:
    """Start ``bridge-store serve *args`` and wait until it is ready.

    The lower level of :func:`start_sidecar`, for callers that pass serve's own
    options. The token (a new random one unless given) reaches the server through its
    environment, never its command line. With ``auth_token_file`` (which holds
    ``auth_token``) the server reads it from that file instead, and its viewer names
    the file to whoever would connect a bridge. With ``tokens_file`` the server takes
    the named tokens of that file instead, and ``auth_token`` (required then) is the
    one of them the returned Sidecar calls with.
    """
    child_env = {**os.environ, **(env or {})}
    argv = [sys.executable, "-m", "bridge_store", "serve", *args]
    if tokens_file is None and auth_token_file is None:
        token = auth_token or new_token()
        child_env[TOKEN_ENV] = token
    else:
        if auth_token is None:
            raise ValueError("with tokens_file or auth_token_file, give the auth_token")
        token = auth_token
        child_env.pop(TOKEN_ENV, None)
        if tokens_file is not None:
            argv += ["--tokens-file", os.fspath(tokens_file)]
        elif auth_token_file is not None:
            argv += ["--auth-token-file", os.fspath(auth_token_file)]
    process, pump, ready = start(
        argv,
        child_env,
        READY_PREFIX,
        echo,
        timeout,
        "bridge-store serve",
        Sidecar.stop_timeout,
        unreachable_status=EXIT_UNREACHABLE,
    )
    return Sidecar(process=process, ready=ready, pump=pump, url=str(ready["url"]), auth_token=token)


def check_store(
    url: str,
    auth_token: str,
    *,
    ca_file: str | os.PathLike[str] | None = None,
    timeout: float = CHECK_TIMEOUT_SECONDS,
) -> None:
    """Make one harmless CallStore call (``agents.get`` of a missing agent).

    Raises ConfigurationError saying what is wrong: nothing answers at ``url``, its
    TLS certificate is not trusted, the store refuses ``auth_token``, or what answers
    is not a CallStore server. The bridge itself would only report these on an agent's
    first call, as a bare ``unauthenticated`` or ``unavailable`` that reads like a
    problem with the bridge. ``ca_file`` (PEM) is trusted besides the system's CAs.
    ``url`` may be the viewer's address (``.../ui/``): the server's is asked.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"the store URL must start with http:// or https://, not {redact(url)!r}"
        )
    url = server_url(url)
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url + _CALL_STORE_PATH,
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
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls_context(ca_file))
    )
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        with error:  # the answer's connection, closed whether or not its body is read
            detail = error.read(500).decode("utf-8", "replace").strip()
        if error.code == 401:
            raise ConfigurationError(
                f"the store at {redact(url)} rejected the auth token (401 unauthenticated); "
                f"give the token the store was started with"
            ) from None
        raise ConfigurationError(
            f"the store at {redact(url)} answered a CallStore call with HTTP {error.code}"
            + (f": {detail}" if detail else "")
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise ConfigurationError(
                f"the store at {redact(url)} has a TLS certificate this machine does not trust "
                f"({reason.verify_message}); give the CA that signed it (--store-ca-file)"
            ) from None
        raise ConfigurationError(unreachable(url, error)) from None
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ConfigurationError(f"{redact(url)} does not answer like a CallStore server")
