"""``Strict-Transport-Security`` on every response of a server that serves HTTPS.

Once a browser has seen it, it reaches the viewer (and a mistyped ``http://`` link)
only over HTTPS for a year, so a network attacker cannot strip TLS from a later visit
and read the session cookie. Sent only under TLS: over plain HTTP the header means
nothing to a browser and would only mislead. ``includeSubDomains`` is left out: it
would bind every other service on the domain to HTTPS too, which is not this
server's decision.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HSTS_HEADER = (b"strict-transport-security", b"max-age=31536000")


class StrictTransportSecurity:
    """Wraps an ASGI app: every HTTP response start gets the HSTS header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_hsts(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != HSTS_HEADER[0]]
                message = {**message, "headers": [*headers, HSTS_HEADER]}
            await send(message)

        await self.app(scope, receive, send_with_hsts)
