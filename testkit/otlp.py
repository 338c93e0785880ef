"""An OTLP/HTTP receiver in this process: decodes what exporters send, with
``opentelemetry-proto`` (the exporter's own dependency), and can fail on purpose. The
run-trace tests read spans back from it; ``bench export-runs`` sends to it.

``OtlpReceiver(port)`` listens on 127.0.0.1 (a free port unless given) from
:meth:`start` to :meth:`stop`; :attr:`answer` is what it does with a request:
``"ok"`` (200, spans kept), an HTTP status (answered without keeping anything), or
``"hang"`` (holds the request until :meth:`stop` or :meth:`release`).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from .services import free_port


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: value_of(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind) if kind is not None else None


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    resource: dict[str, Any]
    scope: str
    scope_version: str
    schema_url: str


@dataclass
class OtlpReceiver:
    port: int = field(default_factory=free_port)
    answer: int | str = "ok"
    #: Trace ids (hex) whose requests are answered 400, as a collector refuses a span.
    refuse: set[str] = field(default_factory=set)
    spans: list[ReceivedSpan] = field(default_factory=list)
    #: Every request's body size as sent (after compression) and its headers.
    requests: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _released: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.requests.append((len(body), dict(self.headers.items())))
                answer = receiver.answer
                if answer == "hang":
                    receiver._released.wait(120)
                    answer = 503
                if answer != "ok" or self.path != "/v1/traces":
                    self.send_response(int(answer) if answer != "ok" else 404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                encoding = self.headers.get("content-encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                if receiver.refused(request):
                    self.send_response(400)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                receiver.keep(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._released.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def refused(self, request: ExportTraceServiceRequest) -> bool:
        return any(
            span.trace_id.hex() in self.refuse
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        )

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: value_of(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            status_message=span.status.message,
                            resource=resource,
                            scope=scope_spans.scope.name,
                            scope_version=scope_spans.scope.version,
                            schema_url=scope_spans.schema_url,
                        )
                    )

    def release(self) -> None:
        """Let hanging requests go (answered 503)."""
        self._released.set()

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def roots(self) -> list[ReceivedSpan]:
        """The root spans received (one per run sent, each time it was sent)."""
        return [span for span in self.spans if not span.parent_span_id]

    def traces(self) -> dict[str, list[ReceivedSpan]]:
        """The spans received, by trace id."""
        found: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans:
            found.setdefault(span.trace_id, []).append(span)
        return found
