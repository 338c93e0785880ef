"""``bridge-store ui``: the viewer alone over a store no server is running on, read-only.

It opens the configured stores without migrating them and serves only the viewer
(no CallStore endpoint), so nothing it serves can change the history. With the key
file serve uses, it opens sealed items as serve does (``sealed_stores``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pluggy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from ..errors import unavailable
from ..security.auth import TokenRegistry
from ..security.encryption import Keyring
from ..security.sealed_stores import seal_stores
from ..stores import Routes, Stores, open_stores
from . import UI_PATH
from .app import create_viewer
from .prices import PriceTable


def create_ui_app(
    routes: Routes,
    tokens: TokenRegistry,
    manager: pluggy.PluginManager,
    keyring: Keyring | None = None,
    prices: PriceTable | None = None,
) -> Starlette:
    # The open stores: sealed as serve seals them, and the backends' own beneath.
    serving: list[tuple[Stores, Stores]] = []

    def stores() -> Stores:
        if not serving:
            raise unavailable("the store is not open yet")
        return serving[0][0]

    def backend_stores() -> Stores:
        stores()
        return serving[0][1]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        opened = await open_stores(manager, routes, migrate=False)
        serving.append((seal_stores(opened.stores, keyring), opened.stores))
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
            Mount(UI_PATH, create_viewer(stores, tokens, backend_stores, prices)),
        ],
        lifespan=lifespan,
    )
