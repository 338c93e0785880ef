"""A run's trace and span ids, derived from what identifies it, so a re-export is the same
trace.

The trace id is the first 16 bytes of SHA-256 over a fixed label, the tenant, the
agent id and the run id (a run is identified by its agent and run ids together; two
tenants' runs of one id are two traces); a span id is the first 8 bytes of SHA-256
over another label, the same names and which span it is (the run itself, or a tool
call by its id). A backend that deduplicates by ids keeps one copy of a run sent
twice, and one that does not shows the same trace id twice, never two traces. The
names are joined with NUL, which no tenant, agent id or run id holds (a tool call's
id, which may, comes last), so no two runs or spans share the hashed text. An all-zero
id is invalid in OTLP; one chance in 2**64 per span, and then it is 1.
"""

from __future__ import annotations

import hashlib

_TRACE_LABEL = b"bridge-store run trace v1"
_SPAN_LABEL = b"bridge-store run span v1"
#: The part of the root span's id that no tool call id can be (tool ids are after ``tool``).
ROOT = "run"


def _digest(label: bytes, *names: str) -> bytes:
    text = b"\x00".join((label, *(name.encode("utf-8", "surrogatepass") for name in names)))
    return hashlib.sha256(text).digest()


def trace_id(tenant: str, agent_id: str, run_id: str) -> int:
    """The run's trace id."""
    return int.from_bytes(_digest(_TRACE_LABEL, tenant, agent_id, run_id)[:16], "big") or 1


def span_id(tenant: str, agent_id: str, run_id: str, *part: str) -> int:
    """The id of one span of the run: ``ROOT``, or ``("tool", call_id)``."""
    return int.from_bytes(_digest(_SPAN_LABEL, tenant, agent_id, run_id, *part)[:8], "big") or 1
