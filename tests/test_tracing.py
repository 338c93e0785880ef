"""Traces: a span per CallStore call with the RPC attributes, backend work as its children."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from bridge_store.errors import ConfigurationError
from bridge_store.ops.tracing import SPAN_NAME, Tracing, tracing_from_environment
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

TOKEN = "tracing-test-token"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Iterator[Tracing]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = Tracing(provider)
    traced.instrument()
    try:
        yield traced
    finally:
        traced.shutdown()


def call(base_url: str, substore: str, method: str, data: Any, **headers: str) -> httpx.Response:
    return httpx.post(
        base_url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"authorization": f"Bearer {TOKEN}", **headers},
        timeout=30.0,
    )


def traced_calls(url: str, tracing: Tracing, exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """Spans of an append (under a caller's traceparent) and a failing get on ``url``."""
    app = create_app(ServerConfig(routes=Routes.single(url), auth_token=TOKEN), tracing=tracing)
    with running(app) as base_url:
        exporter.clear()  # start-up work (migrations) is not a call
        appended = call(
            base_url,
            "runEvents",
            "append",
            {"runId": "r", "eventType": "e"},
            traceparent=TRACEPARENT,
        )
        assert appended.status_code == 200
        assert call(base_url, "agents", "get", {}).status_code == 400
        assert httpx.get(base_url + "/healthz").status_code == 200
    return list(exporter.get_finished_spans())


def server_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [span for span in spans if span.kind is SpanKind.SERVER]


def children_of(parent: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """Every span below ``parent``, at any depth."""
    assert parent.context is not None
    below: list[ReadableSpan] = []
    frontier = {parent.context.span_id}
    while frontier:
        found = [s for s in spans if s.parent is not None and s.parent.span_id in frontier]
        below += found
        frontier = {s.context.span_id for s in found if s.context is not None}
    return below


def check_call_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The RPC attributes and the caller's trace; the append's backend spans."""
    append, get = server_spans(spans)  # /healthz is not traced
    for span in (append, get):
        assert span.name == SPAN_NAME
        assert span.attributes is not None
        assert span.attributes["rpc.system"] == "connect_rpc"
        assert span.attributes["rpc.service"] == "sdk.v1.SdkStoreCallbackService"
        assert span.attributes["rpc.method"] == "CallStore"
    assert append.attributes is not None
    assert append.attributes["bridge_store.substore"] == "runEvents"
    assert append.attributes["bridge_store.method"] == "append"
    assert "rpc.connect_rpc.error_code" not in append.attributes
    assert get.attributes is not None
    assert get.attributes["bridge_store.substore"] == "agents"
    assert get.attributes["rpc.connect_rpc.error_code"] == "invalid_argument"
    # The W3C traceparent the caller sent: same trace, the caller's span as parent.
    assert append.context is not None
    assert format(append.context.trace_id, "032x") == TRACE_ID
    assert append.parent is not None
    assert format(append.parent.span_id, "016x") == PARENT_ID
    assert get.context is not None
    assert get.context.trace_id != append.context.trace_id
    backend = children_of(append, spans)
    for span in backend:
        assert span.context is not None
        assert span.context.trace_id == append.context.trace_id
    # Nothing left over: every span belongs to one of the two calls.
    assert len(spans) == 2 + len(backend) + len(children_of(get, spans))
    return backend


def test_sqlite_calls_have_sqlalchemy_children(
    tmp_path: Path, tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    spans = traced_calls(f"sqlite:///{tmp_path / 'traced.db'}", tracing, exporter)
    backend = check_call_spans(spans)
    statements = [span for span in backend if span.kind is SpanKind.CLIENT]
    # One span per statement: the append's insert is traced once, not once per
    # instrumented constructor.
    assert len([span for span in statements if span.name.startswith("INSERT")]) == 1
    for span in statements:
        assert span.attributes is not None
        assert span.attributes.get("db.system") == "sqlite"
        # Statements, never the documents bound to them.
        assert '"eventType"' not in str(span.attributes)


@pytest.mark.postgres
def test_postgres_calls_have_sqlalchemy_children(
    make_migrated_postgres_url: Callable[[], str],
    tracing: Tracing,
    exporter: InMemorySpanExporter,
) -> None:
    backend = check_call_spans(traced_calls(make_migrated_postgres_url(), tracing, exporter))
    statements = [
        span for span in backend if span.kind is SpanKind.CLIENT and span.name != "connect"
    ]
    # The append is one statement on Postgres (docs/sql.md), and traced once.
    assert len(statements) == 1
    assert (statements[0].attributes or {}).get("db.system") == "postgresql"


@pytest.mark.redis
def test_redis_calls_have_redis_children(
    make_redis_url: Callable[..., str], tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    backend = check_call_spans(traced_calls(make_redis_url(), tracing, exporter))
    commands = [span for span in backend if (span.attributes or {}).get("db.system") == "redis"]
    assert commands
    for span in commands:
        # redis-py's instrumentation keeps the command and hides its arguments.
        statement = str((span.attributes or {}).get("db.statement", ""))
        assert '"eventType"' not in statement


def test_memory_calls_have_no_children(tracing: Tracing, exporter: InMemorySpanExporter) -> None:
    assert check_call_spans(traced_calls("memory://", tracing, exporter)) == []


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "store"},  # says nothing about where spans go
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"},
        {"OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_traces_stay_off_unless_the_environment_names_a_destination(
    environ: dict[str, str],
) -> None:
    assert tracing_from_environment(environ) is None


def test_the_environment_configures_the_exporter_and_the_resource() -> None:
    traced = tracing_from_environment({"OTEL_TRACES_EXPORTER": "console"})
    assert traced is not None
    try:
        attributes = traced.tracer_provider.resource.attributes
        assert attributes["service.name"] == "bridge-store"
        assert attributes["service.version"]
    finally:
        traced.shutdown()
    otlp = tracing_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert otlp is not None
    otlp.tracer_provider.shutdown()
    with pytest.raises(ConfigurationError, match="'zipkin_json', which no installed package"):
        tracing_from_environment({"OTEL_TRACES_EXPORTER": "zipkin_json"})


def test_asked_for_without_the_extra_it_warns_and_stays_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def find_spec(name: str) -> None:
        return None

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with caplog.at_level(logging.WARNING, logger="bridge_store.ops.tracing"):
        assert tracing_from_environment({"OTEL_TRACES_EXPORTER": "console"}) is None
    assert "pip install 'bridge-store[otel]'" in caplog.text


def test_without_tracing_nothing_imports_opentelemetry() -> None:
    program = (
        "import sys\n"
        "from bridge_store.server.app import create_app\n"
        "from bridge_store.cli import build_parser\n"
        "from bridge_store.server.config import ServerConfig\n"
        "from bridge_store.stack.stores import Routes\n"
        "from bridge_store.ops.tracing import tracing_from_environment\n"
        "build_parser()\n"
        "assert tracing_from_environment({}) is None\n"
        "create_app(ServerConfig(routes=Routes.single('memory://'), auth_token='t'))\n"
        "loaded = sorted(name for name in sys.modules if name.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=120)
