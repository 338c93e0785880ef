"""``bridge-store ui``: the viewer alone over a store no server is running on, read-only.

It opens the configured stores without migrating them and serves only the viewer
(no CallStore endpoint), so nothing it serves can change the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pluggy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from ..auth import TokenRegistry
from ..errors import unavailable
from ..stores import Routes, Stores, open_stores
from . import UI_PATH
from .app import create_viewer


def create_ui_app(
    routes: Routes, tokens: TokenRegistry, manager: pluggy.PluginManager
) -> Starlette:
    serving: list[Stores] = []

    def stores() -> Stores:
        if not serving:
            raise unavailable("the store is not open yet")
        return serving[0]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        opened = await open_stores(manager, routes, migrate=False)
        serving.append(opened.stores)
        try:
            yield
        finally:
            serving.clear()
            await opened.close()

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{UI_PATH}/", status_code=307)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok" if serving else "starting"}, 200 if serving else 503)

    return Starlette(
        routes=[
            Route("/", home, methods=["GET"]),
            Route(UI_PATH, home, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Mount(UI_PATH, create_viewer(stores, tokens)),
        ],
        lifespan=lifespan,
    )
