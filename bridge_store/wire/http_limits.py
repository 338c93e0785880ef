"""The bounds ``serve`` puts on HTTP clients, and the open-file limit they depend on.

:mod:`.http_guard` enforces them in the protocol layer; docs/connect.md says why each
has its value and what it was measured against.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

#: File descriptors kept back from the connection cap for everything else the server
#: opens: backend connection pools (Postgres 10, Redis 50, S3 32 by default), SQLite
#: files, the listening socket, logs.
#: Checkpoint blobs ride base64-encoded inside requests, so the default leaves room
#: for blobs of about 95 MiB. The limit applies to the decompressed body as well.
DEFAULT_MAX_REQUEST_BYTES = 128 * 1024 * 1024

RESERVED_FILE_DESCRIPTORS = 256


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one connection may take. The defaults are far above what the bridge needs.

    The bridge sends a head of about 300 bytes and about ten headers; its calls arrive
    whole in one read.
    """

    #: The request line and headers together; 431 beyond.
    max_head_bytes: int = 64 * 1024
    max_header_count: int = 256
    #: The whole request head must arrive within this many seconds of the connection
    #: opening or of its first byte (a new request on a kept-alive connection); 408.
    head_timeout: float = 10.0
    #: The longest pause between two reads of a request body (nginx's
    #: ``client_body_timeout`` rule); a 95 MiB checkpoint over a slow link keeps going.
    body_timeout: float = 30.0
    #: How long an idle kept-alive connection stays open after a response. Longer than
    #: the idle timeouts of common clients (Node's agent and httpx: 5 s), so that the
    #: client closes first and never sends a request into a connection being closed.
    keep_alive_timeout: int = 30
    #: Open connections; beyond it a new one is answered 503 and closed at once.
    max_connections: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_head_bytes", "max_header_count", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        for name in ("head_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force.

    Many systems start services with a soft limit of 1024 and a much higher hard one;
    each connection and each backend connection is a file descriptor.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
        return hard
    return soft if soft != resource.RLIM_INFINITY else hard


def connection_cap(requested: int, open_file_limit: int) -> int:
    """The connection cap that leaves room for the server's other descriptors."""
    if open_file_limit == resource.RLIM_INFINITY:
        return requested
    return max(1, min(requested, open_file_limit - RESERVED_FILE_DESCRIPTORS))
