"""Agent runs as OpenTelemetry traces, in the GenAI semantic conventions, sent over OTLP.

A run becomes one trace (:mod:`.mapping`: the run the root span, each tool call a
child; names in :mod:`.conventions`, ids from :mod:`.ids`), read from the stores by
:mod:`.reading` and sent by the SDK's OTLP/HTTP exporter (:mod:`.sender`). Two ways
in: ``serve --export-runs`` sends each run as it ends (:mod:`.live`, through the
store's export queue, ``features.ExportQueue``), and ``bridge-store export-runs``
sends stored history (:mod:`.replay`). Both need the ``otel`` extra; nothing here but
this module loads without it.
"""

from __future__ import annotations

import importlib.util

from ..errors import ConfigurationError

INSTALL_HINT = "pip install 'bridge-store[otel]'"
#: Where ``serve --export-runs`` and ``export-runs --to`` send traces when not given.
EXPORT_RUNS_ENV = "BRIDGE_STORE_EXPORT_RUNS_URL"


def require_otel(flag: str) -> None:
    """ConfigurationError naming the install line unless the ``otel`` extra is there."""
    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        if importlib.util.find_spec(module) is None:
            raise ConfigurationError(
                f"{flag} sends traces with OpenTelemetry, which is not installed: {INSTALL_HINT}"
            )
