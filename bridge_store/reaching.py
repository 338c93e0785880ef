"""Reaching a running server from a client (the history commands, ``bridge``, ``launch``):
the address people give, and what it means when the server cannot be reached.

People copy the address they see: the ready line's ``viewerUrl`` or the browser's
address bar, both ending in ``/ui/``. That is taken for the server's own address.
What goes wrong on the way is said in one line naming the fix: an ``https://`` URL
for a server that speaks plain HTTP (OpenSSL's "wrong version number"), a plain
``http://`` URL for one that speaks TLS (it hangs up without an answer), a token the
server does not know.
"""

from __future__ import annotations

import http.client
import ssl

from .urls import redact

#: The viewer's path under a server's address (``bridge_store.viewer.UI_PATH``).
VIEWER_PATH = "ui/"


def server_url(url: str) -> str:
    """``url`` as a server's address ending in ``/``; the viewer's address counts."""
    base = url if url.endswith("/") else url + "/"
    if base.endswith("/" + VIEWER_PATH):
        base = base[: -len(VIEWER_PATH)]
    return base


def unreachable(url: str, error: BaseException) -> str:
    """Why the server at ``url`` gave no answer (an ``OSError`` of ``urllib``), with
    the fix when it is known."""
    shown = redact(url)
    reason = getattr(error, "reason", error)
    plain_answer = isinstance(reason, ssl.SSLError) and reason.reason == "WRONG_VERSION_NUMBER"
    if url.startswith("https://") and plain_answer:
        plain = "http://" + shown.removeprefix("https://")
        return f"the server at {shown} speaks plain HTTP, not HTTPS: give {plain}"
    if url.startswith("http://") and isinstance(
        reason, (http.client.RemoteDisconnected, ConnectionResetError)
    ):
        secure = "https://" + shown.removeprefix("http://")
        return (
            f"the server at {shown} hung up without answering plain HTTP; if it serves "
            f"TLS, give {secure}"
        )
    return f"cannot reach the store at {shown}: {reason}"


def rejected_token(url: str, source: str | None) -> str:
    """The server at ``url`` refused the token (``source``: where it was read, if said)."""
    where = f" in {source}" if source else ""
    return (
        f"the store at {redact(url)} rejected the token{where} (401 unauthenticated); give "
        "the token the server was started with (serve's --auth-token-file, "
        "./bridge-store.token by default), or one of its --tokens-file"
    )
