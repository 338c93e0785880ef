"""The history viewer as an ASGI app, mounted at ``/ui`` by ``serve`` and ``bridge-store ui``.

Pages are Jinja2 templates over the data of :mod:`bridge_store.viewer.pages`; every
page answers ``?format=json`` with that same data. Nothing here writes to the store:
the viewer reads through a :class:`~bridge_store.viewer.reader.HistoryReader` that
only makes ``get`` and ``list`` calls.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic
from urllib.parse import parse_qs, quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import ConnectError, invalid_argument
from ..types import Document
from ..wire import jsontext
from . import export_pages, pages, templating
from .markdown import transcript_markdown
from .printable import utf8
from .session import (
    CSRF_FIELD,
    Principal,
    Sessions,
    csrf_ok,
    csrf_token,
    keep_csrf,
)

#: A sign-in form is a token and two short fields; anything larger is not one.
MAX_FORM_BYTES = 16 * 1024
FORMATS = ("html", "json")

#: (principal) -> what that principal reads with.
ContextFor = Callable[[Principal], pages.Context]


@dataclass
class Viewer(Generic[Principal]):
    """Builds the app: who is signed in (``sessions``) and what they read (``context_for``)."""

    sessions: Sessions[Principal]
    context_for: Callable[[Principal], pages.Context]

    def app(self) -> Starlette:
        routes = [
            Route("/", self._page(pages.agents), methods=["GET"]),
            Route("/agent", self._page(pages.agent), methods=["GET"]),
            Route("/runs", self._page(pages.runs), methods=["GET"]),
            Route("/overview", self._page(pages.overview), methods=["GET"]),
            Route("/run", self._run, methods=["GET"]),
            Route("/events", self._page(pages.events), methods=["GET"]),
            Route("/outline", self._page(pages.outline_page), methods=["GET"]),
            Route("/search", self._page(pages.search_page), methods=["GET"]),
            Route("/export/run.jsonl", self._export_run, methods=["GET"]),
            Route("/export/agent.jsonl", self._export_agent, methods=["GET"]),
            Route("/export/transcript.md", self._export_markdown, methods=["GET"]),
            Route("/sign-in", self._sign_in_form, methods=["GET"]),
            Route("/sign-in", self._sign_in, methods=["POST"]),
            Route("/sign-out", self._sign_out, methods=["POST"]),
            Mount("/static", StaticFiles(packages=[("bridge_store.viewer", "static")])),
        ]
        return Starlette(routes=routes)

    # -- pages ------------------------------------------------------------------------

    def _page(self, function: pages.PageFunction) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self._serve(request, function)

        return endpoint

    async def _serve(self, request: Request, function: pages.PageFunction) -> Response:
        wanted = request.query_params.get("format", "html")
        context = await self._context(request)
        if context is None:
            return self._unauthenticated(request, wanted)
        try:
            if wanted not in (*FORMATS, "fragment"):
                raise invalid_argument("format must be html or json")
            pages.refuse_nul(request.query_params)
            view = await function(context, request.query_params)
        except ConnectError as error:
            return self._error(request, error, wanted, context)
        view.data["signedIn"] = context.signed_in()
        if wanted == "json":
            return _json(view.data)
        if wanted == "fragment":
            html = templating.render_fragment(view, base=_base(request))
            header = templating.render_run_header(view) if "run" in view.data else None
            return _json({**view.data, "html": html, "blocks": None, "header": header})
        return self._html(request, view.template, view.title, view.data)

    async def _run(self, request: Request) -> Response:
        if request.query_params.get("agent"):
            return await self._serve(request, pages.run)
        context = await self._context(request)
        if context is None:
            return self._unauthenticated(request, request.query_params.get("format", "html"))
        try:
            pages.refuse_nul(request.query_params)
            found = await pages.find_run(context, request.query_params)
        except ConnectError as error:
            wanted = request.query_params.get("format", "html")
            return self._error(request, error, wanted, context)
        query = urlencode({"agent": found["agentId"], "id": found["runId"]})
        return RedirectResponse(f"{_base(request)}/run?{query}", status_code=303)

    async def _context(self, request: Request) -> pages.Context | None:
        principal = await self.sessions.principal(request)
        if principal is None:
            return None
        return replace(self.context_for(principal), server_url=_server_url(request))

    def _unauthenticated(self, request: Request, wanted: str) -> Response:
        if wanted != "html":
            return _json({"code": "unauthenticated", "message": "sign in first"}, status=401)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(
            f"{_base(request)}/sign-in?{urlencode({'next': target})}", status_code=303
        )

    def _error(
        self,
        request: Request,
        error: ConnectError,
        wanted: str,
        context: pages.Context | None = None,
    ) -> Response:
        status = error.code.http_status
        if wanted != "html":
            return _json({"code": error.code.value, "message": error.message}, status=status)
        data: Document = {"code": error.code.value, "message": error.message}
        if context is not None:
            data["signedIn"] = context.signed_in()
        return self._html(request, "error.html", "Not shown", data, status=status)

    def _html(
        self, request: Request, template: str, title: str, data: Document, *, status: int = 200
    ) -> HTMLResponse:
        token = csrf_token(request)
        html = templating.render_page(
            template,
            title=title,
            data=data,
            base=_base(request),
            csrf=token,
        )
        response = HTMLResponse(utf8(html), status_code=status)
        response.headers.update(SECURITY_HEADERS)
        keep_csrf(response, token, path=_base(request) or "/", secure=_secure(request))
        return response

    # -- exports ----------------------------------------------------------------------

    async def _export(
        self,
        request: Request,
        make: Callable[[pages.Context], Awaitable[AsyncIterator[Document]]],
        filename: str,
    ) -> Response:
        context = await self._context(request)
        if context is None:
            return self._unauthenticated(request, "json")
        try:
            pages.refuse_nul(request.query_params)
            lines = await make(context)
        except ConnectError as error:
            return self._error(request, error, "json")

        async def body() -> AsyncIterator[bytes]:
            async for line in lines:
                yield jsontext.dumps(line) + b"\n"

        headers = {**_attachment(filename), "X-Content-Type-Options": "nosniff"}
        return StreamingResponse(body(), media_type="application/x-ndjson", headers=headers)

    async def _export_run(self, request: Request) -> Response:
        params = request.query_params
        agent_id, run_id = params.get("agent", ""), params.get("run", "")
        return await self._export(
            request,
            lambda context: export_pages.export_run(context, agent_id, run_id),
            f"run-{run_id}.jsonl",
        )

    async def _export_agent(self, request: Request) -> Response:
        agent_id = request.query_params.get("id", "")
        return await self._export(
            request,
            lambda context: export_pages.export_agent(context, agent_id),
            f"agent-{agent_id}.jsonl",
        )

    async def _export_markdown(self, request: Request) -> Response:
        params = request.query_params
        agent_id, run_id = params.get("agent", ""), params.get("run", "")
        context = await self._context(request)
        if context is None:
            return self._unauthenticated(request, "json")
        try:
            pages.refuse_nul(params)
            whole = await export_pages.whole_transcript(context, agent_id, run_id)
        except ConnectError as error:
            return self._error(request, error, "json")
        text = "".join(transcript_markdown(**whole))
        headers = {**_attachment(f"transcript-{run_id}.md"), "X-Content-Type-Options": "nosniff"}
        return PlainTextResponse(text, media_type="text/markdown; charset=utf-8", headers=headers)

    # -- signing in and out -----------------------------------------------------------

    async def _sign_in_form(self, request: Request) -> Response:
        return self._sign_in_page(request, request.query_params.get("next"), problem=None)

    def _sign_in_page(
        self, request: Request, target: str | None, *, problem: str | None
    ) -> Response:
        data = {"next": _local_path(target, _base(request)), "problem": problem}
        return self._html(request, "sign_in.html", "Sign in", data, status=401 if problem else 200)

    async def _sign_in(self, request: Request) -> Response:
        form = await _form(request)
        if form is None or not csrf_ok(request, form.get(CSRF_FIELD)):
            return PlainTextResponse("this form is out of date; reload the page", status_code=403)
        token = form.get("token", "").strip()
        if not token or await self.sessions.authenticate(token) is None:
            problem = "That token is not valid here."
            return self._sign_in_page(request, form.get("next"), problem=problem)
        base = _base(request)
        response = RedirectResponse(_local_path(form.get("next"), base), status_code=303)
        self.sessions.sign_in(response, token, path=base or "/", secure=_secure(request))
        return response

    async def _sign_out(self, request: Request) -> Response:
        form = await _form(request)
        if form is None or not csrf_ok(request, form.get(CSRF_FIELD)):
            return PlainTextResponse("this form is out of date; reload the page", status_code=403)
        base = _base(request)
        response = RedirectResponse(f"{base}/sign-in", status_code=303)
        self.sessions.sign_out(request, response, path=base or "/", secure=_secure(request))
        return response


#: No framing by other sites, no sniffing, no referrer leaking ids elsewhere, and only
#: this origin's own scripts and styles (the pages have no inline script or style).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _json(data: Any, *, status: int = 200) -> Response:
    response = Response(jsontext.dumps(data), status_code=status, media_type="application/json")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _base(request: Request) -> str:
    """The path the viewer is mounted at ("/ui"), from Starlette's Mount."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _server_url(request: Request) -> str:
    """The server's root as this request reached it (the viewer is mounted below it)."""
    return str(request.url.replace(path=_base(request).rpartition("/")[0] + "/", query=""))


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def _attachment(filename: str) -> dict[str, str]:
    safe = _UNSAFE_FILENAME.sub("_", filename)[:200]
    encoded = quote(filename)
    return {"Content-Disposition": f"attachment; filename=\"{safe}\"; filename*=UTF-8''{encoded}"}


def _local_path(target: str | None, base: str) -> str:
    """Where to go after signing in: a path inside the viewer, never another site."""
    home = f"{base}/"
    if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
        return home
    return target


async def _form(request: Request) -> dict[str, str] | None:
    """A small urlencoded form body (parsed here: Starlette's parser needs another package)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=10, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    return {name: values[0] for name, values in fields.items()}
