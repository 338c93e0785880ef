"""Bounds on what one HTTP client can hold: head size, slow heads and bodies, connections.

uvicorn's httptools protocol, which ``serve`` runs on for speed, bounds none of this:
a request head of any size is buffered, a connection that sends nothing or sends its
head a byte at a time is kept forever (``timeout_keep_alive`` only starts after a
response), and uvicorn's ``limit_concurrency`` answers 503 only to a complete request
head, so idle connections still pile up until the process runs out of file
descriptors and every call fails. ``h11_max_incomplete_event_size`` applies to the
slower h11 protocol alone. The figures are in docs/connect.md (``python -m bench
http-limits``); the limits themselves are in :mod:`.http_limits`.

:class:`GuardedHttpToolsProtocol` is uvicorn's protocol with those bounds added at the
points where the parser reports progress. A request that arrives in one read, as every
call of the bridge does, arms no timer at all; the added cost is a few attribute tests
per read and per request.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from asyncio import Transport
from asyncio.events import TimerHandle
from typing import ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .http_limits import HttpLimits
from .one_write import OneWriteResponses

logger = logging.getLogger(__name__)

#: Refused connections are logged at most this often, however many arrive.
_REFUSAL_LOG_INTERVAL_SECONDS = 60.0
#: An answer that ends a connection (431, 408, 503) is followed by a lingering close,
#: as in nginx and Apache: the server half-closes and discards what the client still
#: sends, for at most this long and this many bytes, then closes. Closing at once would
#: make the client's pending writes draw a reset, which can discard the answer before
#: the client reads it.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 1024 * 1024
#: A connection beyond the cap is answered when its request arrives, or after this long.
_REFUSAL_WAIT_SECONDS = 1.0
#: At most this many connections wait in a refusal or a lingering close at once; beyond
#: them a connection is closed at once, so a flood cannot use up the reserved
#: descriptors.
_MAX_LINGERING = 128


class _Refusal(Exception):
    """Raised from a parser callback to stop parsing and answer with an HTTP error."""

    def __init__(self, status: int, reason: str, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.code = code
        self.message = message


_tickets = itertools.count()

_TOO_MANY_CONNECTIONS = _Refusal(
    503, "Service Unavailable", "unavailable", "too many open connections"
)


def _too_large(message: str) -> _Refusal:
    return _Refusal(431, "Request Header Fields Too Large", "resource_exhausted", message)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`HttpLimits` enforced.

    Use :func:`guarded_protocol` to get a subclass bound to a set of limits, and give
    it to ``uvicorn.Config(http=...)``.
    """

    limits: ClassVar[HttpLimits] = HttpLimits()
    _last_refusal_log: ClassVar[float] = -_REFUSAL_LOG_INTERVAL_SECONDS
    _refused_since_log: ClassVar[int] = 0
    _lingering: ClassVar[int] = 0

    # Per-connection state, set in connection_made.
    #: No request is in progress: the connection is new, or its last request has been
    #: read whole, and the next one's headers have not all arrived.
    _awaiting_head: bool
    _awaiting_body: bool
    #: A request ended in the read being handled, so not all of that read's bytes are
    #: head bytes: the read is left out of the count and starts no head timer (an
    #: undercount of at most one read, which the exact check at the end of the head
    #: makes up for).
    _message_ended: bool
    _head_bytes: int
    #: The length of the read being handled.
    _read_bytes: int
    #: When the connection last had no request in progress, as a ticket number (loop
    #: time is too coarse to order connections made in one loop turn): the oldest such
    #: one gives up its place at the connection cap.
    _quiet_since: int
    _body_activity: float
    _deadline: TimerHandle | None
    #: The connection is beyond the cap and waits for its request to be refused.
    _refusing: bool
    #: Answered and half-closed: what the client still sends is read and dropped.
    _draining: int | None
    #: Counted in ``_lingering`` (refusing or draining).
    _counted: bool

    def connection_made(self, transport: Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._awaiting_head = True
        self._awaiting_body = False
        self._message_ended = False
        self._head_bytes = 0
        self._read_bytes = 0
        self._quiet_since = next(_tickets)
        self._body_activity = 0.0
        self._deadline = None
        self._refusing = False
        self._draining = None
        self._counted = False
        if len(self.connections) > self.limits.max_connections and not self._evict_one():
            self._refuse_connection()
            return
        self._deadline = self.loop.call_later(self.limits.head_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._uncount()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._draining is not None:
            self._draining += len(data)
            if self._draining > _LINGER_BYTES:
                self.transport.close()
            return
        if self._refusing:
            self._answer_and_close(_TOO_MANY_CONNECTIONS)
            return
        # uvicorn's data_received, except that a _Refusal raised by a callback below is
        # answered with its own status instead of a generic 400.
        self._unset_keepalive_if_required()
        self._message_ended = False
        self._read_bytes = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, _Refusal):
                self._answer_and_close(error.__context__)
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._message_ended:
            return
        if self._awaiting_head:
            # Part of a head (or blank lines before one), still incomplete: count it (the
            # parser buffers a header until its line ends) and give the head a deadline.
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_head_bytes:
                self._answer_and_close(_too_large(self._head_message()))
            elif self._deadline is None:
                self._deadline = self.loop.call_later(
                    self.limits.head_timeout, self._head_timed_out
                )
        elif self._awaiting_body:
            self._body_activity = self.loop.time()
            if self._deadline is None:
                self._deadline = self.loop.call_later(
                    self.limits.body_timeout, self._body_timed_out
                )

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        if self._deadline is not None:
            self._cancel_deadline()
        limits = self.limits
        if len(self.headers) > limits.max_header_count:
            raise _too_large(f"more than {limits.max_header_count} request headers")
        if self._head_bytes + self._read_bytes > limits.max_head_bytes:
            # Only a head that came in more than the limit's worth of reads can be too
            # large; the bridge's arrive whole in one small read and skip this sum.
            size = len(self.url)
            for name, value in self.headers:
                size += len(name) + len(value) + 4  # ": " and CRLF
            if size > limits.max_head_bytes:
                raise _too_large(self._head_message())
        self._head_bytes = 0
        self._awaiting_body = True
        before = self.cycle
        super().on_headers_complete()
        # uvicorn writes no body for HEAD: a head held for one would never leave.
        if self.cycle is not before and self.cycle.scope["method"] != "HEAD":
            self.cycle.transport = OneWriteResponses(self.transport, self.cycle)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._awaiting_body = False
        self._awaiting_head = self._message_ended = True
        self._quiet_since = next(_tickets)
        if self._deadline is not None:
            self._cancel_deadline()
        super().on_message_complete()

    # -- deadlines ---------------------------------------------------------------------

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        self._deadline = None
        if self._awaiting_head and not self.transport.is_closing():
            self._answer_and_close(
                _Refusal(
                    408,
                    "Request Timeout",
                    "deadline_exceeded",
                    f"the request head did not arrive within {self.limits.head_timeout:g} s",
                )
            )

    def _body_timed_out(self) -> None:
        self._deadline = None
        if not self._awaiting_body or self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:
            # The application is not reading: its own pace, not the client's.
            self._body_activity = now
        idle_for = now - self._body_activity
        if idle_for < self.limits.body_timeout:
            self._deadline = self.loop.call_later(
                self.limits.body_timeout - idle_for, self._body_timed_out
            )
            return
        self._answer_and_close(
            _Refusal(
                408,
                "Request Timeout",
                "deadline_exceeded",
                f"the request body paused for more than {self.limits.body_timeout:g} s",
            )
        )

    # -- answers -----------------------------------------------------------------------

    def _head_message(self) -> str:
        return f"request head larger than {self.limits.max_head_bytes} bytes"

    def _answer_and_close(self, refusal: _Refusal) -> None:
        """Answer with a Connect error body, unless a response already started, and close."""
        self._cancel_deadline()
        self._refusing = False
        self._awaiting_head = self._awaiting_body = False
        if self.transport.is_closing() or self._draining is not None:
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self.transport.close()  # too late for an answer of our own
            return
        body = json.dumps({"code": refusal.code, "message": refusal.message}).encode()
        head = (
            f"HTTP/1.1 {refusal.status} {refusal.reason}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        self.transport.write(head.encode("latin-1") + body)
        if cycle is not None and not cycle.response_complete:
            # The application is still reading this request: it sees a disconnect and
            # must not answer on top of this.
            cycle.disconnected = True
            cycle.message_event.set()
        self._linger()

    def _linger(self) -> None:
        if not self._counted and not self._count():
            self.transport.close()
            return
        self._draining = 0
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._deadline = self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    def _evict_one(self) -> bool:
        """Close the connection quiet for longest with no request in progress.

        A connection holding no request costs its client nothing to reopen, while
        refusing a new one would fail a call: when idle or slow connections fill the
        cap, the newest arrival takes the place of the oldest of them. False when every
        connection is inside a request. Runs only at the cap.
        """
        victim: GuardedHttpToolsProtocol | None = None
        for connection in self.connections:
            if (
                connection is not self
                and isinstance(connection, GuardedHttpToolsProtocol)
                and connection._is_quiet()
                and (victim is None or connection._quiet_since < victim._quiet_since)
            ):
                victim = connection
        if victim is None:
            return False
        victim._cancel_deadline()
        victim._awaiting_head = False
        victim.transport.close()
        return True

    def _is_quiet(self) -> bool:
        return (
            self._awaiting_head
            and not self._refusing
            and self._draining is None
            and not self.transport.is_closing()
            and (self.cycle is None or self.cycle.response_complete)
            and not self.pipeline
        )

    def _refuse_connection(self) -> None:
        self._log_refusal()
        if not self._count():
            self.transport.close()
            return
        self._refusing = True
        self._deadline = self.loop.call_later(
            _REFUSAL_WAIT_SECONDS, self._answer_and_close, _TOO_MANY_CONNECTIONS
        )

    def _count(self) -> bool:
        """Take a lingering slot; False when every slot is taken."""
        cls = type(self)
        if cls._lingering >= _MAX_LINGERING:
            return False
        cls._lingering += 1
        self._counted = True
        return True

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            type(self)._lingering -= 1

    @classmethod
    def _log_refusal(cls) -> None:
        cls._refused_since_log += 1
        now = time.monotonic()
        if now - cls._last_refusal_log >= _REFUSAL_LOG_INTERVAL_SECONDS:
            logger.warning(
                "refused %d connection(s): %d are open, the most allowed (serve --max-connections)",
                cls._refused_since_log,
                cls.limits.max_connections,
            )
            cls._last_refusal_log = now
            cls._refused_since_log = 0


def guarded_protocol(limits: HttpLimits) -> type[GuardedHttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` enforcing ``limits``."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})
