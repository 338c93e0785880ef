"""Where runs go: the collector's URL, checked, and what ``serve --export-runs`` waits.

Nothing here imports OpenTelemetry, so the server's configuration can hold these
settings without the ``otel`` extra loaded (``serve`` checks it is installed).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..backend.features import ExportQueue, Leases
from ..errors import ConfigurationError
from ..urls import redact

#: The OTLP/HTTP path of traces, added to a URL that does not end with it.
TRACES_PATH = "/v1/traces"


def traces_endpoint(url: str) -> str:
    """Where traces go for ``url``: itself if its path ends with ``/v1/traces``, else
    the path with ``/v1/traces`` added, as the SDK treats ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (``http://collector:4318``, ``https://cloud.langfuse.com/api/public/otel``).

    A password in the URL is sent as basic auth and never shown (:func:`redact`); a
    query is refused, since the exporter's error messages would print it."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        raise ConfigurationError(
            f"the OTLP URL {redact(url)!r} is not a URL: give http(s)://HOST[:PORT][/PATH]"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"the OTLP URL {redact(url)!r} is not an http:// or https:// URL with a host: "
            "give the collector's OTLP/HTTP address, such as http://localhost:4318"
        )
    if parts.query:
        # The exporter's own error lines print the request's path and query.
        raise ConfigurationError(
            f"the OTLP URL {redact(url)!r} has a query: give credentials in "
            "OTEL_EXPORTER_OTLP_HEADERS, which is never logged, not in the URL"
        )
    path = parts.path.rstrip("/")
    if not path.endswith(TRACES_PATH):
        path += TRACES_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """``serve --export-runs``: the collector, and the pace of the export.

    ``settle_seconds``: a run is sent this long after it ended, so the events the
    bridge appends right after its last update are in its trace. ``poll_seconds``:
    how often the exporting server looks at the queue when it found nothing.
    ``lease_seconds``: how long the export lease lasts unrenewed (a server that dies
    leaves the export to another within it). ``backoff_seconds``: the first and the
    longest wait after the collector failed; the wait doubles in between.
    """

    endpoint: str
    settle_seconds: float = 2.0
    poll_seconds: float = 1.0
    lease_seconds: float = 60.0
    backoff_seconds: tuple[float, float] = (1.0, 60.0)

    @classmethod
    def to(cls, url: str) -> ExportSettings:
        """Settings sending to ``url`` (checked: ConfigurationError naming the fix)."""
        return cls(traces_endpoint(url))

    @property
    def shown(self) -> str:
        """The endpoint as logs may show it: no password, no query."""
        return redact(self.endpoint)


def export_backend(backend: object, description: str) -> tuple[ExportQueue, Leases]:
    """The runs' backend as the export needs it: a queue and leases; ConfigurationError
    naming the fix otherwise."""
    if not (isinstance(backend, ExportQueue) and isinstance(backend, Leases)):
        raise ConfigurationError(
            f"--export-runs keeps ended runs in the store, which the runs backend "
            f"{description} cannot (it lacks an export queue or leases): send runs with "
            "`bridge-store export-runs` on a schedule instead"
        )
    return backend, backend
