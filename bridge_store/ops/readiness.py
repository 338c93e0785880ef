"""``GET /readyz``: whether every configured backend can serve calls right now.

``/healthz`` says the process answers (liveness); ``/readyz`` asks each backend a
cheap question (``Backend.readiness``: one ``SELECT``, ``PING`` or small read that
also checks the schema) within the backend timeout, all backends at once, and answers
200 only when every one of them is ready. Otherwise 503, with a JSON body naming each
backend by scheme, substores and redacted URL, and why it is not ready, so an
orchestrator stops routing bridges to a store that would answer ``unavailable``.

No auth, like ``/healthz``: probes rarely carry tokens. The body holds no secret (URLs
are redacted, reasons are the messages clients get anyway).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import ConnectError
from ..substores import Backend
from ..urls import redact

READY_PATH = "/readyz"

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServedBackend:
    """A started backend and what it serves, as the readiness answer names it."""

    url: str
    substores: tuple[str, ...]
    backend: Backend

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme

    def describe(self) -> dict[str, object]:
        return {"scheme": self.scheme, "substores": list(self.substores), "url": redact(self.url)}


async def probe(served: ServedBackend, seconds: float) -> str | None:
    """None when the backend is ready; otherwise why not, in one line."""
    backend = served.backend
    # Third-party backends written before readiness existed: answering the schema
    # question at all means they reach their store.
    readiness = getattr(backend, "readiness", None)
    try:
        async with asyncio.timeout(seconds):
            if readiness is None:
                await backend.schema_revision()
                return None
            reason: str | None = await readiness()
            return reason
    except TimeoutError:
        return f"no answer within {seconds:g} s"
    except ConnectError as error:
        return error.message
    except Exception as error:
        # A backend bug rather than an outage: the trace goes to the log, the answer
        # names only the exception's type (its text might hold anything).
        logger.warning("readiness probe of %s failed", redact(served.url), exc_info=True)
        return f"the probe failed ({type(error).__name__})"


async def readiness_report(
    backends: list[ServedBackend], seconds: float
) -> tuple[bool, list[dict[str, object]]]:
    """Whether every backend is ready, and the readiness answer's entry for each."""
    reasons = await asyncio.gather(*(probe(served, seconds) for served in backends))
    entries: list[dict[str, object]] = []
    for served, reason in zip(backends, reasons, strict=True):
        entry = served.describe()
        entry["ready"] = reason is None
        if reason is not None:
            entry["reason"] = reason
        entries.append(entry)
    return all(reason is None for reason in reasons), entries
