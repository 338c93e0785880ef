"""``s3://bucket/prefix?param=value`` parsed into settings; imports no S3 library."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from bridge_store.backend.substores import DEFAULT_BACKEND_TIMEOUT
from bridge_store.errors import ConfigurationError
from bridge_store.urls import redact_nested

_ADDRESSING_STYLES = ("auto", "path", "virtual")
_TEXT_PARAMS = (
    "endpoint_url",
    "region",
    "profile",
    "access_key_id",
    "secret_access_key",
    "session_token",
    "addressing_style",
)
_INT_PARAMS = ("max_attempts", "max_connections")
_FLOAT_PARAMS = ("connect_timeout", "request_timeout", "blob_timeout")
#: Where the AWS SDKs and CLI read a custom endpoint (MinIO, LocalStack, R2): the
#: S3-specific variable first, as they do.
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
PARAMS = _TEXT_PARAMS + _INT_PARAMS + _FLOAT_PARAMS


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where the store lives and how to reach it.

    Unset endpoint, region and credentials fall back to the standard AWS chain
    (``AWS_*`` environment variables, ``~/.aws/config`` and ``credentials``, instance
    roles). Secrets are excluded from ``repr`` so a logged settings object leaks nothing.

    The three timeouts: ``connect_timeout`` and ``request_timeout`` (every request but
    a checkpoint blob's) default to the server's backend timeout (``serve
    --backend-timeout``, 5 s), so an unreachable or partitioned S3 gives
    ``unavailable`` within about that long; ``blob_timeout`` bounds a checkpoint
    blob's GET or PUT, body included, which must fit a 95 MiB blob on a slow link.
    """

    bucket: str
    prefix: str
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    addressing_style: str = "auto"
    #: Total tries per request, first one included, for throttling, 5xx and lost
    #: connections, with jittered exponential backoff (100 ms doubling, at most 2 s).
    max_attempts: int = 4
    #: Requests in flight at once: bounds how many one list page fans out.
    max_connections: int = 32
    connect_timeout: float = DEFAULT_BACKEND_TIMEOUT
    request_timeout: float = DEFAULT_BACKEND_TIMEOUT
    blob_timeout: float = 60.0

    def describe(self) -> str:
        """The store's location for messages: no credentials."""
        where = f"s3://{self.bucket}/{self.prefix}"
        # An endpoint may carry credentials of its own (http://user:pw@minio:9000).
        return f"{where} at {redact_nested(self.endpoint_url)}" if self.endpoint_url else where


def parse_url(
    url: str,
    timeout: float = DEFAULT_BACKEND_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> S3Settings:
    """The settings ``url`` describes; ``timeout`` is the default of the two request
    timeouts it omits, and the endpoint comes from ``AWS_ENDPOINT_URL_S3`` or
    ``AWS_ENDPOINT_URL`` in ``environ`` (the process's) when the URL has none."""
    environ = os.environ if environ is None else environ
    parts = urlsplit(url)
    bucket = parts.hostname or ""
    if not bucket or parts.port is not None or parts.username or parts.password:
        raise ConfigurationError(
            "s3 URLs look like s3://bucket/prefix?endpoint_url=...&region=... "
            "(credentials go in parameters or the standard AWS environment, not the host)"
        )
    prefix = unquote(parts.path).strip("/")
    if prefix:
        prefix += "/"

    values: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name not in PARAMS:
            raise ConfigurationError(
                f"unknown s3 URL parameter {name!r} (known: {', '.join(PARAMS)})"
            )
        if name in values:
            raise ConfigurationError(f"s3 URL parameter {name!r} given twice")
        values[name] = value

    if values.get("addressing_style", "auto") not in _ADDRESSING_STYLES:
        raise ConfigurationError(f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)}")
    if ("access_key_id" in values) != ("secret_access_key" in values):
        raise ConfigurationError("access_key_id and secret_access_key go together")

    if "endpoint_url" not in values:
        for variable in ENDPOINT_ENV:
            if environ.get(variable):
                values["endpoint_url"] = environ[variable]
                break
    numbers: dict[str, int | float] = {"connect_timeout": timeout, "request_timeout": timeout}
    for name in _INT_PARAMS:
        if name in values:
            numbers[name] = _positive(name, values.pop(name), int)
    for name in _FLOAT_PARAMS:
        if name in values:
            numbers[name] = _positive(name, values.pop(name), float)
    return S3Settings(bucket=bucket, prefix=prefix, **values, **numbers)  # type: ignore[arg-type]


def _positive(name: str, text: str, kind: type[int] | type[float]) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise ConfigurationError(f"s3 URL parameter {name} must be a positive number") from None
    if value <= 0:
        raise ConfigurationError(f"s3 URL parameter {name} must be a positive number")
    return value
