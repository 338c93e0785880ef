"""What a ``redis://`` / ``rediss://`` store URL says, checked before anything connects.

``redis[s]://[[user]:password@]host[:port][/db][?param=value&...]`` with these
parameters, all optional:

- ``prefix``: the key namespace (default ``bridge-store``); several teams or
  environments share one Redis by choosing different prefixes.
- ``run_events_ttl``: seconds; when set, a run's event log expires that long after its
  last append (off by default).
- ``socket_connect_timeout``, ``socket_timeout``: seconds (default: the server's
  backend timeout, ``serve --backend-timeout``, 5 s): how long a call waits for Redis
  before failing with ``unavailable``. TCP keepalives find a dead connection within
  about as long (``BackendOptions.tcp_keepalive``).
- ``max_connections``: the connection pool size (default 50); calls beyond it wait for
  a free connection up to ``socket_timeout``.
- ``rediss://`` only: ``ssl_cert_reqs`` (``required``/``optional``/``none``),
  ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``.

Redis Cluster: ``redis+cluster://[[user]:password@]host:port[,host:port...][/][?...]``
names one or more seed nodes (the client discovers the rest), takes the parameters
above but no database number (a cluster has only db 0), ``max_connections`` per node,
and also:

- ``wait_replicas``: after every acknowledged write, ``WAIT`` until that many replicas
  have it (within half the socket timeout), or answer ``unavailable``; so a failover
  to one of them loses no acknowledged write (default 0: Redis's asynchronous
  replication).

Nothing here imports redis-py, so a bad URL is reported even without the extra.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from bridge_store.backend.substores import DEFAULT_BACKEND_TIMEOUT, BackendOptions
from bridge_store.errors import ConfigurationError

CLUSTER_SCHEME = "redis+cluster"
SCHEMES = ("redis", "rediss", CLUSTER_SCHEME)
DEFAULT_PREFIX = "bridge-store"
DEFAULT_MAX_CONNECTIONS = 50

#: Prefixes end up inside hash tags (``{prefix:substore}``) and SCAN patterns, so
#: braces and glob characters are out.
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}")
_TLS_PARAMS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
_CERT_REQS = ("required", "optional", "none")
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """A parsed store URL: where Redis is, and how this backend uses it."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    tls: bool
    prefix: str = DEFAULT_PREFIX
    run_events_ttl: int | None = None
    connect_timeout: float = DEFAULT_BACKEND_TIMEOUT
    socket_timeout: float = DEFAULT_BACKEND_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Extra keyword arguments for redis-py's SSL connection (``rediss://`` only).
    tls_options: dict[str, str | bool] = field(default_factory=dict)
    #: The seed nodes of a Redis Cluster (``redis+cluster://``); empty otherwise.
    nodes: tuple[tuple[str, int], ...] = ()
    wait_replicas: int = 0

    @property
    def cluster(self) -> bool:
        return bool(self.nodes)

    def connection_options(self, options: BackendOptions) -> dict[str, Any]:
        """What every connection to this Redis (or to each node of a cluster) is opened with."""
        # Imported here: parsing a URL must work, and name the extra, without redis-py.
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        return {
            "username": self.username,
            "password": self.password,
            "socket_connect_timeout": self.connect_timeout,
            "socket_timeout": self.socket_timeout,
            # A pooled connection cut off by a partition is found dead while idle.
            "socket_keepalive": True,
            "socket_keepalive_options": options.tcp_keepalive(),
            "max_connections": self.max_connections,
            # No automatic retries: a script whose reply was lost may have run, and
            # running an append again would store the event twice. Failures surface as
            # `unavailable`; a dead pooled connection is replaced on the next call.
            "retry": Retry(NoBackoff(), 0),
            "client_name": f"bridge-store:{self.prefix}",
        }


def parse_url(url: str, timeout: float = DEFAULT_BACKEND_TIMEOUT) -> RedisSettings:
    """The settings a ``redis://`` or ``rediss://`` URL describes; ConfigurationError if bad.

    ``timeout`` is the default of the two socket timeouts the URL omits.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigurationError(f"not a Redis URL: {parts.scheme}://")
    cluster = parts.scheme == CLUSTER_SCHEME
    # urlsplit cannot read "h1:p1,h2:p2"; the seed nodes are parsed here instead.
    nodes = _cluster_nodes(parts.netloc.rpartition("@")[2]) if cluster else ()
    if cluster and parts.path.strip("/"):
        raise ConfigurationError(
            "a redis+cluster:// URL names no database (a cluster has only db 0): "
            f"drop {parts.path!r}"
        )
    try:
        port = nodes[0][1] if cluster else parts.port or 6379
    except ValueError:
        raise ConfigurationError("the Redis URL has an invalid port") from None
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params = dict(pairs)
    if len(params) != len(pairs):
        raise ConfigurationError("a Redis URL parameter is given twice")
    tls = parts.scheme == "rediss"
    settings = RedisSettings(
        host=nodes[0][0] if cluster else parts.hostname or "localhost",
        port=port,
        db=0 if cluster else _db(parts.path),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        tls=tls,
        prefix=_prefix(params.pop("prefix", DEFAULT_PREFIX)),
        run_events_ttl=_ttl(params.pop("run_events_ttl", None)),
        connect_timeout=_seconds(params, "socket_connect_timeout", timeout),
        socket_timeout=_seconds(params, "socket_timeout", timeout),
        max_connections=_positive_int(params, "max_connections", DEFAULT_MAX_CONNECTIONS),
        tls_options=_tls_options(params) if tls else {},
        nodes=nodes,
        wait_replicas=_count(params, "wait_replicas") if cluster else 0,
    )
    if params:
        unknown = ", ".join(sorted(params))
        raise ConfigurationError(f"unknown Redis URL parameter(s): {unknown}")
    return settings


def _cluster_nodes(netloc: str) -> tuple[tuple[str, int], ...]:
    nodes: list[tuple[str, int]] = []
    for node in netloc.split(","):
        host, _, port = node.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")  # an IPv6 address
        if not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(
                "a redis+cluster:// URL lists its nodes as host:port[,host:port...], "
                f"not {netloc!r}"
            )
        nodes.append((host, int(port)))
    return tuple(nodes)


def _count(params: dict[str, str], name: str) -> int:
    raw = params.pop(name, "0")
    if not raw.isascii() or not raw.isdigit():
        raise ConfigurationError(f"{name} must be a whole number, not {raw!r}")
    return int(raw)


def _db(path: str) -> int:
    number = path.strip("/")
    if not number:
        return 0
    if not number.isascii() or not number.isdigit():
        raise ConfigurationError(f"the Redis URL path must be a database number, not {path!r}")
    return int(number)


def _prefix(value: str) -> str:
    if not _PREFIX.fullmatch(value):
        raise ConfigurationError(
            "the Redis key prefix must be 1-100 characters of letters, digits and ._:/- "
            f"starting with a letter or digit, not {value!r}"
        )
    return value


def _ttl(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise ConfigurationError(
            f"run_events_ttl must be a positive whole number of seconds, not {value!r}"
        )
    return int(value)


def _seconds(params: dict[str, str], name: str, default: float) -> float:
    raw = params.pop(name, None)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def _positive_int(params: dict[str, str], name: str, default: int) -> int:
    raw = params.pop(name, None)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(f"{name} must be a positive integer, not {raw!r}")
    return int(raw)


def _tls_options(params: dict[str, str]) -> dict[str, str | bool]:
    options: dict[str, str | bool] = {}
    for name in _TLS_PARAMS:
        if name in params:
            options[name] = params.pop(name)
    if "ssl_cert_reqs" in params:
        reqs = params.pop("ssl_cert_reqs")
        if reqs not in _CERT_REQS:
            raise ConfigurationError(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}")
        options["ssl_cert_reqs"] = reqs
    if "ssl_check_hostname" in params:
        raw = params.pop("ssl_check_hostname").lower()
        if raw not in _BOOLEANS:
            raise ConfigurationError("ssl_check_hostname must be true or false")
        options["ssl_check_hostname"] = _BOOLEANS[raw]
    return options
