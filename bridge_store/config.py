"""Server configuration: what the CLI (or an embedding application) decides."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigurationError
from .lifecycle.retain import RetentionSettings
from .pricing.book import PriceBook
from .run_traces.settings import ExportSettings
from .security.auth import TokenRegistry
from .security.encryption import Keyring
from .stores import Routes
from .substores import DEFAULT_BACKEND_TIMEOUT, BackendOptions
from .viewer.session_keys import SessionKeys
from .viewer.welcome import BridgeHint
from .wire._compression import DEFAULT_COMPRESS_MIN_BYTES

#: ``serve`` prints this, then a JSON object, on stderr once it is listening.
READY_PREFIX = "bridge-store ready "

#: Checkpoint blobs ride base64-encoded inside requests, so the default leaves room
#: for blobs of about 95 MiB. The limit applies to the decompressed body as well.
DEFAULT_MAX_REQUEST_BYTES = 128 * 1024 * 1024


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
    otherwise (:class:`~bridge_store.substores.BackendOptions`).
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
        if not (self.backend_timeout > 0 and self.backend_timeout != float("inf")):
            raise ConfigurationError(
                f"the backend timeout (--backend-timeout) must be a positive number of "
                f"seconds, not {self.backend_timeout}"
            )
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
        return BackendOptions(timeout=self.backend_timeout)
