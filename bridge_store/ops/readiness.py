"""``GET /readyz``: whether every configured backend can serve calls right now.

``/healthz`` says the process answers (liveness); ``/readyz`` asks each backend a
cheap question (``Backend.readiness``: one ``SELECT``, ``PING`` or small read that
also checks the schema) within the backend timeout, all backends at once, and answers
200 only when every one of them is ready. Otherwise 503, with a JSON body naming each
backend by scheme, substores and redacted URL, and why it is not ready, so an
orchestrator stops routing bridges to a store that would answer ``unavailable``.

No auth needed, like ``/healthz``: probes rarely carry tokens. Without an admin token
the answer says only ready or unready per kind of backend (``postgresql``, ``redis``):
hosts, users, database names, key prefixes and the reasons (which name hosts) are a
map of the deployment, so they go to admins only (the one-token shorthand is one; a
named token needs scope ``admin``), with URLs redacted even then.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..backend.features import ReadinessProbe
from ..backend.substores import Backend
from ..errors import ConnectError
from ..security.auth import Principal, Scope
from ..urls import redact

READY_PATH = "/readyz"
#: What an answer without an admin token says about the detail it leaves out.
DETAIL_HINT = "send an admin bearer token for each backend's URL, substores and reason"

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
    try:
        async with asyncio.timeout(seconds):
            if not isinstance(backend, ReadinessProbe):
                # A backend without the probe (features.py): answering the schema
                # question at all means it reaches its store.
                await backend.schema_revision()
                return None
            reason: str | None = await backend.readiness()
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


def readiness_answer(
    ready: bool, entries: list[dict[str, object]], caller: Principal | None
) -> dict[str, object]:
    """The body of ``/readyz`` for ``caller`` (None: no valid token)."""
    if caller is not None and caller.scope.allows(Scope.ADMIN):
        return admin_answer(ready, entries)
    return public_answer(ready, entries)


def public_answer(ready: bool, entries: list[dict[str, object]]) -> dict[str, object]:
    """The answer for anyone: ready or not, overall and per kind of backend."""
    kinds: dict[str, bool] = {}
    for entry in entries:
        scheme = str(entry["scheme"])
        kinds[scheme] = kinds.get(scheme, True) and entry["ready"] is True
    return {
        "status": "ready" if ready else "unready",
        "backends": [{"scheme": scheme, "ready": ok} for scheme, ok in kinds.items()],
        "detail": DETAIL_HINT,
    }


def admin_answer(ready: bool, entries: list[dict[str, object]]) -> dict[str, object]:
    """The answer for an admin: each backend's redacted URL, substores and reason."""
    return {"status": "ready" if ready else "unready", "backends": entries}
