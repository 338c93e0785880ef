"""``bridge-store ui``: the viewer alone over a store no server is running on, read-only.

It opens the configured stores without migrating them and serves only the viewer
(no CallStore endpoint), so nothing it serves can change the history. With the key
file serve uses, it opens sealed items as serve does (``sealed_stores``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from ..errors import unavailable
from ..pricing.book import PriceBook
from ..security.auth import TokenRegistry
from ..stack.stores import OpenStack, StoreStack
from . import UI_PATH
from .app import create_viewer


class StandaloneViewer:
    """The viewer alone over a :class:`~bridge_store.stack.stores.StoreStack` (sealed as serve
    seals it), opened without migrating when the lifespan starts, closed when it ends."""

    def __init__(
        self, stack: StoreStack, tokens: TokenRegistry, prices: PriceBook | None = None
    ) -> None:
        self.stack = stack
        self.tokens = tokens
        self.prices = prices
        self._open: OpenStack | None = None

    def opened(self) -> OpenStack:
        if self._open is None:
            raise unavailable("the store is not open yet")
        return self._open

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self.stack.opened(migrate=False) as stack:
            self._open = stack
            try:
                yield
            finally:
                self._open = None

    async def home(self, request: Request) -> Response:
        return RedirectResponse(f"{UI_PATH}/", status_code=307)

    async def healthz(self, request: Request) -> JSONResponse:
        up = self._open is not None
        return JSONResponse({"status": "ok" if up else "starting"}, 200 if up else 503)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.home, methods=["GET"]),
                Route(UI_PATH, self.home, methods=["GET"]),
                Route("/healthz", self.healthz, methods=["GET"]),
                Mount(UI_PATH, create_viewer(self.opened, self.tokens, self.prices)),
            ],
            lifespan=self.lifespan,
        )


def create_ui_app(
    stack: StoreStack, tokens: TokenRegistry, prices: PriceBook | None = None
) -> Starlette:
    """The standalone viewer's ASGI app (:class:`StandaloneViewer`)."""
    return StandaloneViewer(stack, tokens, prices).app()
