"""The server: the CallStore endpoint, health, readiness, metrics and the viewer over one
store stack, and its lifecycle.

:class:`BridgeStoreServer` owns the configuration, the store stack
(:class:`~bridge_store.stack.stores.StoreStack`: sealed with the key file, metered, watched) and the
ASGI lifespan that opens and closes it; :meth:`BridgeStoreServer.app` is its ASGI app,
whose routes are declared once, in :meth:`BridgeStoreServer.routes`.
:func:`create_app` is the one-call form.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pluggy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..backend.features import Leases, PoolFigures
from ..backend.plugins import get_plugin_manager
from ..backend.shares import RunShares, run_shares
from ..errors import ConnectError, unavailable
from ..lifecycle.retain import Retention, RetentionCounts, lease_backend
from ..ops.availability import BACKEND_FAILURES, BackendAvailability
from ..ops.metrics import BackendView, Metrics, MetricsEndpoint
from ..ops.observe import CallObserver
from ..ops.readiness import READY_PATH, ServedBackend, readiness_answer, readiness_report
from ..ops.spend import SpendFigures
from ..rpc.connect import CALL_STORE_PATH, CallStoreEndpoint, bearer_principal
from ..rpc.dispatch import HANDLERS, call_store
from ..run_traces.counts import ExportCounts
from ..run_traces.settings import export_backend
from ..security.auth import Principal
from ..security.sealed_stores import sealing
from ..stack.stores import OpenStack, ResolvedStores, StoreStack, resolve
from ..types import Answer
from ..urls import redact
from ..viewer import UI_PATH
from ..viewer.welcome import BridgeHint, sole_holder
from ..workspaces import segment as workspace_segment
from ..workspaces import translate
from ..workspaces.paths import Checkout
from .config import ServerConfig
from .front_page import front_page

if TYPE_CHECKING:
    from ..ops.tracing import Tracing
    from ..run_traces.live import LiveExport

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"


class BridgeStoreApp:
    """The ASGI app: CallStore POSTs go straight to the endpoint, the rest to Starlette.

    Starlette's middleware and router cost a fifth of the CPU of a small call; the
    hot path skips them. Starlette still serves the lifespan, the health check and the
    404/405 answers (including a GET on the CallStore path).
    """

    def __init__(
        self, server: BridgeStoreServer, call_store_endpoint: ASGIApp, starlette: Starlette
    ) -> None:
        self.server = server
        #: The CallStore endpoint, under the tracing middleware when traces are on.
        self.call_store_endpoint = call_store_endpoint
        self.starlette = starlette

    async def open_stores(self) -> None:
        """The server's :meth:`~BridgeStoreServer.open_stores`."""
        await self.server.open_stores()

    @property
    def metrics(self) -> Metrics | None:
        """The server's metrics (None with ``metrics=False``), e.g. for an embedding
        application to add its own or serve the registry elsewhere."""
        return self.server.metrics

    @property
    def availability(self) -> BackendAvailability:
        """Whether each backend answers, as the calls see it (availability.py)."""
        return self.server.availability

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            if path == CALL_STORE_PATH:
                await self.call_store_endpoint(scope, receive, send)
                return
            # A bridge working in a checkout of a workspace: /w/<segment>/ + CallStore.
            segment = workspace_segment.split_path(path, CALL_STORE_PATH)
            if segment is not None:
                scope = {**scope, workspace_segment.SCOPE_KEY: segment}
                await self.call_store_endpoint(scope, receive, send)
                return
        await self.starlette(scope, receive, send)


class BridgeStoreServer:
    """One server: its configuration, its store stack, and the lifespan that opens it.

    The routed backends are resolved on construction (a bad URL or a missing extra
    raises ConfigurationError now; ``resolved`` are backends already resolved from
    ``config.routes``, else ``plugin_manager``, default every installed backend, resolves
    them), started (migrated when ``config.migrate``) when the lifespan starts, or
    before by :meth:`open_stores`, and closed when it ends. ``tracing`` gives each
    CallStore call a span.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        plugin_manager: pluggy.PluginManager | None = None,
        resolved: ResolvedStores | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.config = config
        self.tracing = tracing
        #: One registry for every route, so a reload of the tokens file reaches them all.
        self.tokens = config.token_registry()
        self.metrics = Metrics(HANDLERS) if config.metrics else None
        self.availability = BackendAvailability(config.routes)
        #: ``serve --export-runs`` (None without): set below, once backends are resolved.
        self.live_export: LiveExport | None = None
        self.export_counts = ExportCounts()
        if resolved is None:
            manager = plugin_manager if plugin_manager is not None else get_plugin_manager()
            resolved = resolve(manager, config.routes, config.backend_options())
        routed = config.routes.served()
        self.served = [
            ServedBackend(url, routed[url], one) for url, one in resolved.backends.items()
        ]
        self.retention_counts = RetentionCounts()
        #: Who takes the retention lease: the agents' backend (features.Leases).
        self.lessee: Leases | None = None
        if config.retain is not None:
            # Checked now: a backend without leases stops the start, before any port opens.
            agents = config.routes.agents
            self.lessee = lease_backend(resolved.backends[agents], redact(agents))
            if self.metrics is not None:
                self.metrics.add_retention(self.retention_counts)
        if config.export_runs is not None:
            # Checked now, as --retain's leases are: before any port opens.
            runs = config.routes.runs
            queue, leases = export_backend(resolved.backends[runs], redact(runs))
            from ..run_traces.live import LiveExport  # OpenTelemetry loads only with it

            self.live_export = LiveExport(config.export_runs, queue, leases, self.export_counts)
            if self.metrics is not None:
                self.metrics.add_run_export(self.export_counts)
        # The stack's layers, bottom first: secrets are sealed closest to the backends;
        # metrics count what clients see, and the live export watches the runs they end.
        layers = [
            *sealing(config.keyring),
            *(self.metrics.layers() if self.metrics is not None else ()),
            *((self.live_export.layer(),) if self.live_export is not None else ()),
        ]
        self.stack = StoreStack(config.routes, resolved, tuple(layers))
        #: Each tenant's spend and failures for /metrics, read from the store's sums.
        self.spend: SpendFigures | None = None
        if self.metrics is not None:
            self.spend = SpendFigures(self._own_shares, config.prices, config.backend_timeout)
            self.metrics.registry.register(self.spend)
        if self.metrics is not None:
            for one in self.served:
                backend = one.backend
                pool_stats = backend.pool_stats if isinstance(backend, PoolFigures) else _no_pool
                availability = self.availability.of_url(one.url).snapshot
                view = BackendView(one.scheme, ",".join(one.substores), pool_stats, availability)
                self.metrics.add_backend(view)
        #: Started by open_stores() ahead of the server (serve does, so a backend that
        #: cannot start stops it with one line, not uvicorn's traceback of a failed
        #: lifespan), or else by the lifespan; served from once the lifespan runs.
        self._started: OpenStack | None = None
        self._serving: OpenStack | None = None

    async def open_stores(self) -> None:
        """Start the backends now rather than when the lifespan starts (which then
        takes them as they are); raises what a backend's start raises."""
        if self._started is None:
            self._started = await self.stack.open(migrate=self.config.migrate)

    def _own_shares(self) -> RunShares | None:
        own = self.serving().stores.beneath()
        return run_shares(own.agents, own.runs)

    def serving(self) -> OpenStack:
        """The open stores; ``unavailable`` until the lifespan has opened them."""
        if self._serving is None:
            raise unavailable("the store is not open yet")
        return self._serving

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.open_stores()
        opened, self._started = self._started, None
        assert opened is not None  # open_stores() sets it
        retention = None
        if self.config.retain is not None and self.lessee is not None:
            # Below the sealing and the call metrics: prune reads no secret, and its
            # deletes are not clients' calls.
            retention = Retention(
                opened.stores.beneath(), self.lessee, self.config.retain, self.retention_counts
            )
            retention.start()
        if self.live_export is not None:
            # Read below the sealing and the metrics: traces open no secret, and their
            # reads are not clients' calls.
            self.live_export.start(opened.stores.beneath())
        self._serving = opened
        try:
            yield
        finally:
            self._serving = None
            if retention is not None:
                await retention.stop()
            if self.live_export is not None:
                await self.live_export.stop()  # writes its memory queue to the store
            await opened.close()

    async def handle(
        self,
        principal: Principal,
        substore: Any,
        method: Any,
        data: Any,
        checkout: Checkout | None = None,
    ) -> Answer:
        """One bridge's call; its agents' ``cwd`` translated for ``checkout``, the one
        its store URL named (:mod:`.workspaces.translate`)."""
        stores = self.serving().stores
        backend = self.availability.of(substore)
        try:
            data = translate.inbound(checkout, substore, method, data)
            output, compressible = await call_store(
                stores, substore, method, data, principal=principal
            )
            answer = translate.outbound(checkout, substore, method, output), compressible
        except ConnectError as error:
            # Only the backend's failures count; a client's mistake says nothing of it.
            if error.code in BACKEND_FAILURES and backend is not None:
                backend.failed(error)
            raise
        except Exception:
            if backend is not None:
                backend.broke()
            raise
        if backend is not None and not backend.up:
            backend.succeeded()
        return answer

    async def healthz(self, request: Request) -> JSONResponse:
        # For orchestrators, without auth: ok once the lifespan has opened every store.
        # It does not probe the backends, so polling it costs nothing.
        if self._serving is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        # For orchestrators, without auth: probes every backend, so each poll costs a
        # round trip to each. Only an admin sees which hosts and databases they are.
        if self._serving is None:
            return JSONResponse({"status": "starting", "backends": []}, status_code=503)
        # Bounded like any wait on a backend: a partitioned one is unready within
        # --backend-timeout, before the orchestrator's own probe timeout gives up.
        ready, entries = await readiness_report(self.served, self.config.backend_timeout)
        caller = bearer_principal(request.headers.get("authorization"), self.tokens)
        body = readiness_answer(ready, entries, caller)
        return JSONResponse(body, status_code=200 if ready else 503)

    def endpoint(self) -> CallStoreEndpoint:
        return CallStoreEndpoint(
            self.handle,
            tokens=self.tokens,
            max_request_bytes=self.config.max_request_bytes,
            compress_min_bytes=self.config.compress_min_bytes,
            observer=CallObserver(
                HANDLERS,
                metrics=self.metrics,
                access_log=self.config.access_log,
                spans=self.tracing.spans if self.tracing is not None else None,
            ),
        )

    def routes(self, endpoint: CallStoreEndpoint) -> list[BaseRoute]:
        """Every route the server answers, declared once."""
        config, metrics = self.config, self.metrics
        routes: list[BaseRoute] = [
            Route(CALL_STORE_PATH, endpoint, methods=["POST"]),
            Route(HEALTH_PATH, self.healthz, methods=["GET"]),
            Route(READY_PATH, self.readyz, methods=["GET"]),
        ]
        if metrics is not None:
            metrics_tokens = None if config.metrics_public else self.tokens
            endpoint_of_metrics = MetricsEndpoint(
                metrics.registry, metrics_tokens, metrics.activity_collector, self.spend
            )
            routes.append(Route(METRICS_PATH, endpoint_of_metrics, methods=["GET"]))
        if config.ui:
            from ..viewer.app import create_viewer  # Jinja2 and the pages load only with it

            shorthand = sole_holder(self.tokens)
            hint = config.bridge_hint or BridgeHint(token_env=shorthand, named_tokens=not shorthand)
            viewer = create_viewer(
                self.serving,
                self.tokens,
                config.prices,
                bridge_hint=hint,
                session_keys=config.session_keys,
            )
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
        return routes

    def app(self) -> BridgeStoreApp:
        """The server's ASGI app."""
        endpoint = self.endpoint()
        # Only CallStore is traced: health, readiness and metrics polls would drown it.
        traced = self.tracing.wrap(endpoint) if self.tracing is not None else endpoint
        starlette = Starlette(routes=self.routes(endpoint), lifespan=self.lifespan)
        return BridgeStoreApp(self, traced, starlette)


def create_app(
    config: ServerConfig,
    *,
    plugin_manager: pluggy.PluginManager | None = None,
    resolved: ResolvedStores | None = None,
    tracing: Tracing | None = None,
) -> BridgeStoreApp:
    """The bridge-store ASGI app for ``config``: :class:`BridgeStoreServer`'s app."""
    server = BridgeStoreServer(
        config, plugin_manager=plugin_manager, resolved=resolved, tracing=tracing
    )
    return server.app()


def _no_pool() -> None:
    """The pool figures of a backend without ``pool_stats``: none."""
