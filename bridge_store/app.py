"""The ASGI application: the CallStore endpoint, a health check, and the store lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pluggy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .config import ServerConfig
from .connect import CALL_STORE_PATH, CallStoreEndpoint, bearer_principal
from .dispatch import HANDLERS, call_store
from .errors import ConnectError, unavailable
from .front_page import front_page
from .lifecycle.retain import Retention, RetentionCounts, lease_backend
from .ops.availability import BACKEND_FAILURES, BackendAvailability
from .ops.metrics import BackendView, Metrics, MetricsEndpoint
from .ops.observe import CallObserver
from .ops.readiness import READY_PATH, ServedBackend, readiness_answer, readiness_report
from .plugins import get_plugin_manager
from .security.auth import Principal
from .security.sealed_stores import seal_stores
from .stores import OpenStores, ResolvedStores, Stores, resolve
from .types import Answer
from .urls import redact
from .viewer import UI_PATH
from .viewer.welcome import BridgeHint, sole_holder

if TYPE_CHECKING:
    from .ops.tracing import Tracing

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"


class BridgeStoreApp:
    """The ASGI app: CallStore POSTs go straight to the endpoint, the rest to Starlette.

    Starlette's middleware and router cost a fifth of the CPU of a small call; the
    hot path skips them. Starlette still serves the lifespan, the health check and the
    404/405 answers (including a GET on the CallStore path).
    """

    def __init__(
        self,
        call_store_endpoint: ASGIApp,
        starlette: Starlette,
        availability: BackendAvailability,
    ) -> None:
        #: The CallStore endpoint, under the tracing middleware when traces are on.
        self.call_store_endpoint = call_store_endpoint
        self.starlette = starlette
        #: Starts the backends now rather than when the lifespan starts (which then
        #: takes them as they are); raises what a backend's start raises.
        self.open_stores: Callable[[], Awaitable[None]] = _nothing_to_open
        #: The app's metrics (None with ``metrics=False``), e.g. for an embedding
        #: application to add its own or serve the registry elsewhere.
        self.metrics: Metrics | None = None
        #: Whether each backend answers, as the calls see it (availability.py).
        self.availability = availability

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == CALL_STORE_PATH
            and scope["method"] == "POST"
        ):
            await self.call_store_endpoint(scope, receive, send)
        else:
            await self.starlette(scope, receive, send)


def create_app(
    config: ServerConfig,
    *,
    plugin_manager: pluggy.PluginManager | None = None,
    resolved: ResolvedStores | None = None,
    tracing: Tracing | None = None,
) -> BridgeStoreApp:
    """The bridge-store ASGI app for ``config``.

    The routed backends are resolved here (a bad URL or a missing extra raises
    ConfigurationError now), started (and migrated when ``config.migrate``) when the
    ASGI lifespan starts and closed when it ends. ``resolved`` are backends already
    resolved from ``config.routes``; otherwise ``plugin_manager`` (default: one with
    every installed backend) resolves them. ``tracing`` (:mod:`.tracing`) gives each
    CallStore call a span.
    """
    if resolved is None:
        manager = plugin_manager if plugin_manager is not None else get_plugin_manager()
        resolved = resolve(manager, config.routes, config.backend_options())
    backends = resolved
    availability = BackendAvailability(config.routes)
    # A one-slot box: the lifespan puts the open stores in, requests read them.
    serving: list[Stores] = []
    # The backends' own substores (unwrapped), for what looks behind the wrappers: the
    # viewer's search finds a backend's full-text index there.
    unwrapped: list[Stores] = []
    routed = config.routes.served()
    served = [ServedBackend(url, routed[url], one) for url, one in resolved.backends.items()]
    metrics = Metrics(HANDLERS) if config.metrics else None
    retention_counts = RetentionCounts()
    if config.retain is not None:
        # Checked now: a backend without leases stops the start, before any port opens.
        lease_backend(resolved.backends[config.routes.agents], redact(config.routes.agents))
        if metrics is not None:
            metrics.add_retention(retention_counts)
    if metrics is not None:
        for one in served:
            pool_stats = getattr(one.backend, "pool_stats", _no_pool)
            view = BackendView(
                one.scheme,
                ",".join(one.substores),
                pool_stats,
                availability.of_url(one.url).snapshot,
            )
            metrics.add_backend(view)

    async def handle(principal: Principal, substore: Any, method: Any, data: Any) -> Answer:
        if not serving:
            raise unavailable("the store is not open yet")
        try:
            answer = await call_store(serving[0], substore, method, data, principal=principal)
        except ConnectError as error:
            # Only the backend's failures count; a client's mistake says nothing of it.
            if error.code in BACKEND_FAILURES and (backend := availability.of(substore)):
                backend.failed(error)
            raise
        except Exception:
            if backend := availability.of(substore):
                backend.broke()
            raise
        backend = availability.of(substore)
        if backend is not None and not backend.up:
            backend.succeeded()
        return answer

    # The started backends, once started: by open_stores() ahead of the server (serve
    # does, so a backend that cannot start stops it with one line, not uvicorn's
    # traceback of a failed lifespan), or else by the lifespan.
    started: list[OpenStores] = []

    async def open_stores() -> None:
        if not started:
            started.append(await backends.start(migrate=config.migrate))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await open_stores()
        opened = started.pop()
        # Secrets are sealed closest to the backends; metrics count what clients see.
        stores = seal_stores(opened.stores, config.keyring)
        serving.append(stores if metrics is None else metrics.counts.metered(stores))
        unwrapped.append(opened.stores)
        retention = None
        if config.retain is not None:
            # Below the sealing and the call metrics: prune reads no secret, and its
            # deletes are not clients' calls.
            lessee = backends.backends[config.routes.agents]
            retention = Retention(opened.stores, lessee, config.retain, retention_counts)
            retention.start()
        try:
            yield
        finally:
            if retention is not None:
                await retention.stop()
            serving.clear()
            unwrapped.clear()
            await opened.close()

    async def healthz(request: Request) -> JSONResponse:
        # For orchestrators, without auth: ok once the lifespan has opened every store.
        # It does not probe the backends, so polling it costs nothing.
        if not serving:
            return JSONResponse({"status": "starting"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        # For orchestrators, without auth: probes every backend, so each poll costs a
        # round trip to each. Only an admin sees which hosts and databases they are.
        if not serving:
            return JSONResponse({"status": "starting", "backends": []}, status_code=503)
        # Bounded like any wait on a backend: a partitioned one is unready within
        # --backend-timeout, before the orchestrator's own probe timeout gives up.
        ready, entries = await readiness_report(served, config.backend_timeout)
        caller = bearer_principal(request.headers.get("authorization"), tokens)
        body = readiness_answer(ready, entries, caller)
        return JSONResponse(body, status_code=200 if ready else 503)

    # One registry for every route, so a reload of the tokens file reaches them all.
    tokens = config.token_registry()
    endpoint = CallStoreEndpoint(
        handle,
        tokens=tokens,
        max_request_bytes=config.max_request_bytes,
        compress_min_bytes=config.compress_min_bytes,
        observer=CallObserver(
            HANDLERS,
            metrics=metrics,
            access_log=config.access_log,
            spans=tracing.spans if tracing is not None else None,
        ),
    )
    routes: list[BaseRoute] = [
        Route(CALL_STORE_PATH, endpoint, methods=["POST"]),
        Route(HEALTH_PATH, healthz, methods=["GET"]),
        Route(READY_PATH, readyz, methods=["GET"]),
    ]
    if metrics is not None:
        metrics_tokens = None if config.metrics_public else tokens
        routes.append(
            Route(METRICS_PATH, MetricsEndpoint(metrics.registry, metrics_tokens), methods=["GET"])
        )
    if config.ui:
        from .viewer.app import create_viewer  # Jinja2 and the pages load only with it

        def stores() -> Stores:
            if not serving:
                raise unavailable("the store is not open yet")
            return serving[0]

        def backend_stores() -> Stores:
            stores()  # unavailable until open
            return unwrapped[0]

        shorthand = sole_holder(tokens)
        hint = config.bridge_hint or BridgeHint(token_env=shorthand, named_tokens=not shorthand)
        viewer = create_viewer(stores, tokens, backend_stores, bridge_hint=hint)
        routes.append(Mount(UI_PATH, viewer))
    # What the ready line's URL opens in a browser: the viewer, or the paths served.
    home = front_page(
        viewer_path=UI_PATH if config.ui else None,
        call_store_path=CALL_STORE_PATH,
        health_path=HEALTH_PATH,
        ready_path=READY_PATH,
        metrics_path=METRICS_PATH if metrics is not None else None,
        metrics_public=config.metrics_public,
    )
    routes.append(Route("/", home, methods=["GET"]))
    # Only CallStore is traced: health, readiness and metrics polls would drown it.
    traced = tracing.wrap(endpoint) if tracing is not None else endpoint
    app = BridgeStoreApp(traced, Starlette(routes=routes, lifespan=lifespan), availability)
    app.open_stores = open_stores
    app.metrics = metrics
    return app


def _no_pool() -> None:
    """The pool figures of a backend without ``pool_stats``: none."""


async def _nothing_to_open() -> None:
    """The stores of an app not made by create_app: its lifespan opens them."""
