"""What is recorded about each CallStore call: its request id, metrics, log line and span.

The wire layer (:mod:`.connect`) tells a :class:`CallObserver` when a request starts,
once its body names the call, and when its answer is ready; the observer feeds the
metrics (:mod:`.metrics`), writes the per-call log line when ``--access-log`` asks
for one, and names the current trace span (:mod:`.tracing`). While a call runs,
:data:`CURRENT_CALL` holds its :class:`CallObservation`, so any line logged during it
carries its request id (:mod:`.logs`).

Only values from the method table reach a label, a log line or a span: a substore or
method the table does not know is recorded as ``unknown``, never as the client sent
it, and nothing from the request body is recorded at all.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .metrics import UNKNOWN, MethodMetrics, Metrics

#: The request header a caller may set to tie its own logs to ours; always answered.
REQUEST_ID_HEADER = "x-request-id"
#: Longest request id kept from a caller; longer ones are cut to this.
MAX_REQUEST_ID_LENGTH = 128
#: What a caller's request id may hold (UUIDs, ULIDs, base64 and the like); anything
#: else is replaced, so a request id can never break a log line or a header.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:+/=-]+")

#: The call being answered in this task, for log records made while it runs.
CURRENT_CALL: contextvars.ContextVar[CallObservation | None] = contextvars.ContextVar(
    "bridge_store_call", default=None
)

access_logger = logging.getLogger("bridge_store.access")

_clock = time.perf_counter
#: A call's labels: substore, method and its sums (None without metrics).
_Labels = tuple[str, str, MethodMetrics | None]
#: The labels of a call whose body has not named it, or named none in the table.
_UNNAMED: _Labels = (UNKNOWN, UNKNOWN, None)


class _RequestIds:
    """New request ids: 32 hex digits, a random half for the process and a counter.

    As unique as 16 random bytes each (``secrets.token_hex(16)``, what they were), at
    a tenth of the cost: that took a ``getrandom`` system call on every call. A
    request id names a call in logs and traces and is no secret. A forked child
    draws a prefix of its own, so the workers of one server never share ids.
    """

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


new_request_id = _RequestIds()


def request_id(header: str | None) -> str:
    """The caller's ``X-Request-Id``, cut to 128 characters, or a new one."""
    if header is not None:
        candidate = header.strip()[:MAX_REQUEST_ID_LENGTH]
        if _REQUEST_ID.fullmatch(candidate):
            return candidate
    return new_request_id()


class CallSpans(Protocol):
    """Names the trace span of the call in progress (see :mod:`.tracing`)."""

    def record(self, substore: str, method: str, code: str) -> None:
        """The call ``substore``.``method`` is answered with ``code``."""


class CallObservation:
    """One request, from its headers to its answer."""

    __slots__ = ("_token", "labels", "request_bytes", "request_id", "started")

    def __init__(self, request_id: str) -> None:
        self.started = _clock()
        self.request_id = request_id
        #: (substore, method, where the call's figures add up: None without metrics),
        #: from the method table once the body names the call.
        self.labels: _Labels = _UNNAMED
        self.request_bytes = 0
        self._token: contextvars.Token[CallObservation | None] | None = None

    @property
    def substore(self) -> str:
        return self.labels[0]

    @property
    def method(self) -> str:
        return self.labels[1]


class CallObserver:
    """Records every call into the metrics, the access log and the trace, as configured.

    ``methods`` is the method table (substore -> method names): the only label values.
    """

    def __init__(
        self,
        methods: Mapping[str, Iterable[str]],
        *,
        metrics: Metrics | None = None,
        access_log: bool = False,
        spans: CallSpans | None = None,
    ) -> None:
        # Per call of the table: its labels and, with metrics, its sums, looked up once
        # per call when its body names it.
        self._labels = {
            (substore, method): (
                substore,
                method,
                metrics.method(substore, method) if metrics is not None else None,
            )
            for substore, names in methods.items()
            for method in names
        }
        self._metrics = metrics
        self._access_log = access_log
        self._spans = spans

    def start(self, request_id_header: str | None) -> CallObservation:
        """A request arrived (its headers are read)."""
        observation = CallObservation(
            new_request_id() if request_id_header is None else request_id(request_id_header)
        )
        observation._token = CURRENT_CALL.set(observation)
        if self._metrics is not None:
            self._metrics.in_flight += 1
        return observation

    def named(
        self, observation: CallObservation, substore: Any, method: Any, request_bytes: int
    ) -> None:
        """The body (``request_bytes`` as received) is decoded and names its call."""
        try:
            labels = self._labels.get((substore, method))
        except TypeError:  # a JSON list or object where a name belongs
            labels = None
        if labels is not None:
            observation.labels = labels
        observation.request_bytes = request_bytes

    def finish(self, observation: CallObservation, code: str, response_bytes: int) -> None:
        """The answer (``response_bytes`` as sent) is ready; ``code`` is ``ok`` or an error's."""
        seconds = _clock() - observation.started
        metrics = self._metrics
        substore, method, sums = observation.labels
        if metrics is not None:
            metrics.in_flight -= 1
            (sums or metrics.unknown).record(
                code, seconds, observation.request_bytes, response_bytes
            )
        if self._spans is not None:
            self._spans.record(substore, method, code)
        if self._access_log:
            duration_ms = round(seconds * 1000, 3)
            access_logger.info(
                "%s.%s %s %.3f ms",
                substore,
                method,
                code,
                duration_ms,
                extra={"code": code, "duration_ms": duration_ms},
            )
        if observation._token is not None:
            CURRENT_CALL.reset(observation._token)
            observation._token = None
