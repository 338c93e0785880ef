"""What the bridge needs of the Cursor API, and whether it can reach it.

Creating an agent and running it take a Cursor API key and the Cursor API: the bridge
reaches it at ``CURSOR_BACKEND_URL``, else at :data:`DEFAULT_API_URL` (the host the
bridge of cursor-sdk 1.1.0 resolves when the variable is unset, seen on the wire).
When it cannot, the SDK's calls fail with ``Network request failed``, naming no host.
:class:`CursorApiLook` looks once, with a bounded wait, while ``bridge-store bridge``
starts, so that it can say so in one line.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from ..urls import redact
from .offline_api import BACKEND_URL_ENV

DEFAULT_API_URL = "https://api2.cursor.sh"
#: How long the look at start may take: name resolution and one TCP connection.
CHECK_TIMEOUT_SECONDS = 5.0
#: What a run needs, for the lines and pages that say it.
RUN_NEEDS = (
    "agents and runs need a Cursor API key (CURSOR_API_KEY) and the Cursor API; "
    "without them, bridge-store bridge --offline keeps agents in the store and ends "
    "every run at once with an error saying no model runs offline"
)


def api_url(environ: Mapping[str, str]) -> str:
    """The Cursor API the bridge will call, given its environment."""
    return environ.get(BACKEND_URL_ENV, "").strip() or DEFAULT_API_URL


class CursorApiLook:
    """One look at the Cursor API at ``url``, started now in a thread of its own: name
    resolution, then one TCP connection. :meth:`reason` waits for it until ``timeout``
    seconds after the start at most (name lookup has no timeout of its own, so a slow
    one is left to finish alone)."""

    def __init__(self, url: str, timeout: float = CHECK_TIMEOUT_SECONDS) -> None:
        self.url = url
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._found: list[str | None] = []
        self._thread = threading.Thread(target=self._look, name="cursor-api-look", daemon=True)
        self._thread.start()

    def reason(self) -> str | None:
        """Why the API cannot be reached, or None when it answered."""
        self._thread.join(max(0.0, self._deadline - time.monotonic()))
        if not self._found:
            return f"no answer within {self._timeout:g} s"
        return self._found[0]

    def _look(self) -> None:
        self._found.append(unreachable_api(self.url, self._timeout))


def unreachable_api(url: str, timeout: float = CHECK_TIMEOUT_SECONDS) -> str | None:
    """Why the Cursor API at ``url`` cannot be reached, or None when a TCP connection
    to it opens (within ``timeout`` seconds once its name is resolved)."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host or parts.scheme not in ("http", "https"):
        return f"{redact(url)} is not an http:// or https:// URL"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"{redact(url)} has no valid port"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror:
        return f"{host} does not resolve"
    except OSError as error:
        return error.strerror or str(error) or type(error).__name__
