"""Traces, with the optional ``otel`` extra: a span per CallStore call, children for backends.

OpenTelemetry's ASGI instrumentation makes the server span of each CallStore request
(honouring an incoming W3C ``traceparent``) and :class:`ConnectSpans` names it after
the RPC (``rpc.system=connect_rpc``, ``rpc.service``, ``rpc.method``, plus
``bridge_store.substore`` and ``bridge_store.method``). The backends' work shows as
its children through the instrumentations of the drivers that send the statements
(asyncpg, sqlite3), of SQLAlchemy (schema migrations and revision reads) and of
redis-py. S3 goes through obstore, whose requests are made in Rust where no Python
HTTP instrumentation reaches, so S3 calls have no child spans.

Configuration is the standard ``OTEL_*`` environment, read by the SDK itself
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_BSP_*``...). Tracing is on when the extra is
installed and the environment names where spans go (``OTEL_TRACES_EXPORTER`` or an OTLP
endpoint), unless ``OTEL_SDK_DISABLED=true``: installing the extra alone sends nothing
anywhere. Without the extra nothing here imports OpenTelemetry, the app is not
wrapped and no call pays anything.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp

from ..errors import ConfigurationError
from .metrics import OK

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'bridge-store[otel]'"
SERVICE = "sdk.v1.SdkStoreCallbackService"
METHOD = "CallStore"
#: The span name the RPC conventions give a call: ``{rpc.service}/{rpc.method}``.
SPAN_NAME = f"{SERVICE}/{METHOD}"
#: Variables that say where spans should go; without one, tracing stays off.
_DESTINATIONS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)
#: The span exporters' entry-point group, as the SDK's own configurator reads it.
_EXPORTER_GROUP = "opentelemetry_traces_exporter"


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the ``OTEL_*`` environment asks for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in _DESTINATIONS)


def tracing_from_environment(environ: Mapping[str, str]) -> Tracing | None:
    """A :class:`Tracing` configured by ``environ``, or None when traces are off.

    Asked for without the extra installed, it logs one warning with the install line
    and returns None: a cluster-wide ``OTEL_*`` setting must not stop the store.
    """
    if not requested(environ):
        return None
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        logger.warning("OTEL_* asks for traces, but the otel extra is missing: %s", INSTALL_HINT)
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from .. import __version__

    resource = Resource.create({"service.version": __version__})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "bridge-store"}))
    # The sampler (OTEL_TRACES_SAMPLER) and span limits come from the environment too.
    provider = TracerProvider(resource=resource)
    for exporter in _exporters(environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider)


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    available = {point.name: point for point in entry_points(group=_EXPORTER_GROUP)}
    exporters: list[SpanExporter] = []
    for name in names:
        if name in ("", "none"):
            continue
        if name == "otlp":
            protocol = environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            )
            name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
        point = available.get(name)
        if point is None:
            raise ConfigurationError(
                f"OTEL_TRACES_EXPORTER names {name!r}, which no installed package provides "
                f"(installed: {', '.join(sorted(available)) or 'none'}); the otel extra "
                f"brings otlp over HTTP: {INSTALL_HINT}"
            )
        # Each exporter reads its own OTEL_EXPORTER_* settings.
        exporters.append(point.load()())
    return exporters


class ConnectSpans:
    """Names the current server span after the CallStore call it answers."""

    def __init__(self) -> None:
        from opentelemetry import trace

        self._current_span = trace.get_current_span

    def record(self, substore: str, method: str, code: str) -> None:
        span = self._current_span()
        if not span.is_recording():
            return
        span.update_name(SPAN_NAME)
        attributes: dict[str, Any] = {
            "rpc.system": "connect_rpc",
            "rpc.service": SERVICE,
            "rpc.method": METHOD,
            "bridge_store.substore": substore,
            "bridge_store.method": method,
        }
        if code != OK:
            attributes["rpc.connect_rpc.error_code"] = code
        span.set_attributes(attributes)


class Tracing:
    """Spans for an app: its server spans, and the backend libraries' client spans."""

    def __init__(self, tracer_provider: TracerProvider) -> None:
        self.tracer_provider = tracer_provider
        self.spans = ConnectSpans()
        self._instrumentors: list[Any] = []

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """``app`` under OpenTelemetry's ASGI middleware (server spans, ``traceparent``)."""
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

        # The send/receive spans would double the spans of every call for nothing.
        return OpenTelemetryMiddleware(
            app, tracer_provider=self.tracer_provider, exclude_spans=["receive", "send"]
        )

    def instrument(self) -> None:
        """Give backend work child spans: the SQL drivers, SQLAlchemy and redis-py.

        The instrumentations patch their libraries process-wide; call this before the
        backends create their engines and clients (``serve`` does), and
        :meth:`uninstrument` to undo it.
        """
        if importlib.util.find_spec("opentelemetry.instrumentation.sqlalchemy") is not None:
            # Imported before the instrumentation wraps create_engine: the asyncio
            # extension binds create_engine when first imported, and a wrapped one there
            # would trace every async engine twice (once per wrapped constructor).
            import sqlalchemy.ext.asyncio  # noqa: F401
            from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

            # Its declared range stops below SQLAlchemy 2.1, whose engine events it
            # hooks are unchanged; tests/test_tracing.py checks the spans it makes.
            self._instrument(SQLAlchemyInstrumentor(), skip_dep_check=True)
        # The SQL backend sends its statements on the drivers' own connections
        # (bridge_store_sql.statements), where SQLAlchemy's events never see them.
        if importlib.util.find_spec("opentelemetry.instrumentation.sqlite3") is not None:
            from opentelemetry.instrumentation.sqlite3 import SQLite3Instrumentor

            self._instrument(SQLite3Instrumentor())
        if (
            importlib.util.find_spec("asyncpg") is not None
            and importlib.util.find_spec("opentelemetry.instrumentation.asyncpg") is not None
        ):
            from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

            self._instrument(AsyncPGInstrumentor())  # type: ignore[no-untyped-call]
        if (
            importlib.util.find_spec("redis") is not None
            and importlib.util.find_spec("opentelemetry.instrumentation.redis") is not None
        ):
            from opentelemetry.instrumentation.redis import RedisInstrumentor

            self._instrument(RedisInstrumentor())

    def _instrument(self, instrumentor: Any, **options: Any) -> None:
        instrumentor.instrument(tracer_provider=self.tracer_provider, **options)
        if instrumentor.is_instrumented_by_opentelemetry:
            self._instrumentors.append(instrumentor)

    def uninstrument(self) -> None:
        for instrumentor in reversed(self._instrumentors):
            instrumentor.uninstrument()
        self._instrumentors.clear()

    def shutdown(self) -> None:
        """Send the spans still buffered and stop the exporters."""
        self.uninstrument()
        self.tracer_provider.shutdown()
