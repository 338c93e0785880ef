"""A server's configuration: what the CLI (or an embedding application) decides.

:class:`ServerConfig` is the server itself (its stores, tokens, keys and features);
:class:`ServingConfig` how it is served (address, processes, connections, TLS). Each
setting is checked once, here, when the configuration is made; the CLI only turns
flags, the environment and ``--config`` into these. The types of the features it
configures (retention, the live export, the viewer's hint) are their own, from the
layers below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..backend.substores import DEFAULT_BACKEND_TIMEOUT, BackendOptions
from ..errors import ConfigurationError
from ..lifecycle.retain import RetentionSettings
from ..pricing.book import PriceBook
from ..run_traces.settings import ExportSettings
from ..security.auth import TokenRegistry
from ..security.encryption import Keyring
from ..stack.stores import Routes
from ..viewer.session_keys import SessionKeys
from ..viewer.welcome import BridgeHint
from ..wire._compression import DEFAULT_COMPRESS_MIN_BYTES
from ..wire.http_limits import DEFAULT_MAX_REQUEST_BYTES, HttpLimits
from .tls import uvicorn_tls

#: ``serve`` prints this, then a JSON object, on stderr once it is listening.
READY_PREFIX = "bridge-store ready "


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything ``create_app`` needs.

    Callers authenticate with ``tokens`` (named tokens with tenants and scopes) or,
    the one-token shorthand, ``auth_token`` (tenant ``default``, scope ``operator``);
    exactly one of the two is given. With ``keyring``, sdkMetadata and checkpoint blobs
    are encrypted before they reach any backend.
    ``migrate`` brings SQL schemas to the latest revision when the server starts.
    ``compress_min_bytes``: gzip responses at least this large when the client accepts
    it; 0 never compresses.
    ``metrics`` serves ``GET /metrics``, behind the bearer token unless
    ``metrics_public``. ``access_log`` logs one line per CallStore call.
    ``ui`` serves the history viewer under ``/ui/``; ``prices`` (the price table,
    read again on SIGHUP) turns its tokens into money.
    ``backend_timeout``: seconds one wait on a backend may take unless its URL says
    otherwise (:class:`~bridge_store.backend.substores.BackendOptions`).
    ``retain``: prune old agents in the background (:mod:`bridge_store.lifecycle.retain`).
    ``export_runs``: send each run that ends to an OTLP collector as a trace
    (:mod:`bridge_store.run_traces.live`; needs the ``otel`` extra).
    ``bridge_hint``: where a bridge finds the token, for the viewer's empty page (by
    default the tokens file's named tokens, or ``BRIDGE_STORE_AUTH_TOKEN``).
    ``session_keys``: what seals and ends viewer sessions, when several processes
    share them (``serve --workers``); by default the viewer makes its own.
    """

    routes: Routes
    auth_token: str | None = None
    tokens: TokenRegistry | None = None
    keyring: Keyring | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    migrate: bool = True
    compress_min_bytes: int = DEFAULT_COMPRESS_MIN_BYTES
    metrics: bool = True
    metrics_public: bool = False
    access_log: bool = False
    ui: bool = True
    prices: PriceBook | None = None
    backend_timeout: float = DEFAULT_BACKEND_TIMEOUT
    retain: RetentionSettings | None = None
    export_runs: ExportSettings | None = None
    bridge_hint: BridgeHint | None = None
    session_keys: SessionKeys | None = None

    def __post_init__(self) -> None:
        # ConfigurationError: the CLI reports it as one line naming the setting.
        if (self.tokens is None) == (self.auth_token is None):
            raise ConfigurationError("give exactly one of auth_token and tokens")
        if self.auth_token is not None and not self.auth_token:
            raise ConfigurationError("the auth token must not be empty")
        if self.max_request_bytes < 1:
            raise ConfigurationError(
                f"the largest request body (--max-request-bytes) must be positive, "
                f"not {self.max_request_bytes}"
            )
        backend_options(self.backend_timeout)
        if self.compress_min_bytes < 0:
            raise ConfigurationError(
                f"the smallest response to gzip (--gzip-min-bytes) must not be negative, "
                f"not {self.compress_min_bytes}"
            )

    def token_registry(self) -> TokenRegistry:
        """The tokens the server accepts."""
        if self.tokens is not None:
            return self.tokens
        assert self.auth_token is not None  # checked in __post_init__
        return TokenRegistry.single(self.auth_token)

    def backend_options(self) -> BackendOptions:
        return backend_options(self.backend_timeout)


def backend_options(timeout: float) -> BackendOptions:
    """What every backend is asked (:class:`~bridge_store.backend.substores.BackendOptions`);
    a timeout that is not a positive number of seconds is one line naming the flag."""
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigurationError(
            f"--backend-timeout must be a positive number of seconds, not {timeout}"
        )
    return BackendOptions(timeout=timeout)


@dataclass(frozen=True, slots=True)
class ServingConfig:
    """How a server is served (:func:`bridge_store.server.run.serve`), as ``serve`` does.

    ``host``/``port``: where it listens (port 0 picks a free one). ``workers``: how many
    processes answer on that port (:mod:`.workers`). ``max_connections``: most client
    connections open at once, lowered to fit the open-file limit. ``ssl_certfile``
    (with ``ssl_keyfile``, ``ssl_ca_certs`` to require client certificates): serve
    HTTPS, with HSTS; the files are read and checked here. ``log_level``: uvicorn's.
    """

    host: str = "127.0.0.1"
    port: int = 8787
    workers: int = 1
    max_connections: int = HttpLimits().max_connections
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_ca_certs: str | None = None
    log_level: str = "info"
    #: uvicorn's TLS settings, made from the files when the configuration is.
    tls: dict[str, Any] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigurationError(f"--workers must be 1 or more, not {self.workers}")
        if self.max_connections < 1:
            raise ConfigurationError("--max-connections must be positive")
        tls = uvicorn_tls(self.ssl_certfile, self.ssl_keyfile, self.ssl_ca_certs)
        object.__setattr__(self, "tls", tls)
