"""``GET /``: what a person who opens the server's address in a browser finds.

The ready line prints the server's root URL, so that is what people open. With the
history viewer on they are sent to it; without it, a short page names the paths the
server does answer, so an address that works never looks like a dead end ("Not Found").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .. import __version__

#: The page has no script, style or image of its own; nothing else may load either.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def front_page(
    *,
    viewer_path: str | None,
    call_store_path: str,
    health_path: str,
    ready_path: str,
    metrics_path: str | None,
    metrics_public: bool,
) -> Callable[[Request], Awaitable[Response]]:
    """The ``GET /`` endpoint: a redirect to ``viewer_path``, or the page of paths.

    ``viewer_path`` is where the viewer is mounted (None when it is off);
    ``metrics_path`` None when metrics are off.
    """
    if viewer_path is not None:
        target = viewer_path.rstrip("/") + "/"

        async def to_viewer(request: Request) -> Response:
            return RedirectResponse(target, status_code=307)

        return to_viewer

    paths = [
        ("POST", call_store_path, "the store RPC the Cursor SDK bridge calls (bearer token)"),
        ("GET", health_path, "liveness: 200 once the server answers"),
        ("GET", ready_path, "readiness: 200 while every backend answers"),
    ]
    if metrics_path is not None:
        guard = "no token" if metrics_public else "bearer token"
        paths.append(("GET", metrics_path, f"Prometheus metrics ({guard})"))
    items = "\n".join(
        f"<li><code>{method} {escape(path)}</code>: {escape(what)}</li>"
        for method, path, what in paths
    )
    html = (
        '<!doctype html>\n<html lang="en">\n<head><meta charset="utf-8">'
        "<title>bridge-store</title></head>\n<body>\n<main>\n"
        f"<h1>bridge-store {escape(__version__)}</h1>\n"
        "<p>A storage server for Cursor SDK bridges. It answers:</p>\n"
        f"<ul>\n{items}\n</ul>\n"
        "<p>The history viewer is off on this server (<code>serve --no-ui</code>).</p>\n"
        "</main>\n</body>\n</html>\n"
    )

    async def paths_page(request: Request) -> Response:
        return HTMLResponse(html, headers=HEADERS)

    return paths_page
