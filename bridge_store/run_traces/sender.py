"""Sending spans: the OpenTelemetry SDK's OTLP/HTTP exporter, on a thread of its own.

The exporter encodes (protobuf), compresses (``OTEL_EXPORTER_OTLP_TRACES_COMPRESSION``),
authenticates (``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``,
read by the exporter itself, never logged), sets TLS
(``OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE``...) and retries what OTLP says to retry
(429, 502, 503, 504, a dropped connection) within its timeout
(``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else ``OTEL_EXPORTER_OTLP_TIMEOUT``, else 10
s). That is every wait: a collector that hangs costs an export one timeout, on the
sender's own thread, never the event loop's time. An export either succeeds or
fails; what to do then (keep the runs queued, back off) is the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from ..urls import redact
from .settings import traces_endpoint


def encoded_size(spans: Sequence[ReadableSpan]) -> int:
    """The bytes ``spans`` make as one OTLP request (before compression)."""
    return encode_spans(spans).ByteSize()


class OtlpSender:
    """Sends batches of spans to one collector, one batch at a time."""

    def __init__(self, url: str, *, timeout: float | None = None) -> None:
        self.endpoint = traces_endpoint(url)
        #: The endpoint as logs and summaries may show it (no password, no query).
        self.shown = redact(self.endpoint)
        self._exporter = OTLPSpanExporter(endpoint=self.endpoint, timeout=timeout)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="bridge-store-otlp")

    async def send(self, spans: Sequence[ReadableSpan]) -> bool:
        """Export ``spans``; whether the collector took them."""
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._thread, self._exporter.export, spans)
        return result is SpanExportResult.SUCCESS

    def close(self) -> None:
        """Stop: an export under way gives up its retries, and the thread ends with it."""
        self._exporter.shutdown()  # type: ignore[no-untyped-call]
        self._thread.shutdown(wait=False, cancel_futures=True)
