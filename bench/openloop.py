"""Open-loop load: CallStore requests at a fixed rate, latency from when each was due.

wrk runs a closed loop: each connection sends its next request when the previous
answer arrives, so a server that stalls also stops the clock of every request that
would have arrived meanwhile (coordinated omission), and p99 under wrk is measured in
a queue the server itself shapes. wrk2, the constant-rate wrk, is not packaged by
Debian, so this module is the open-loop generator ``python -m bench load`` runs at
half of each target's measured maximum.

How it avoids coordinated omission:

- Request ``i`` is *due* at ``start + i / rate``, whatever happened to the requests
  before it. Its latency runs from when it was due to when the last byte of its answer
  arrived, not from when it was written.
- A request that finds every connection busy waits in a queue, and that wait counts.
- The sender wakes on the event loop's timers (millisecond resolution) and sends every
  request that has come due; a late wake-up counts against the server too. So the
  generator's own delays can only make the figures worse, never better; how late the
  sender was is reported beside them (``send_lag_ms``).

Service time (from the moment the request was written to its answer) is reported
too: the gap between the two is the queueing a closed-loop tool does not see.

Requests are the same as wrk's: the mix's templates, the fixed shuffled schedule, the
holes filled as the Lua script fills them (``bench.mix.dynamic_values``), over
keep-alive HTTP/1.1 connections parsed with httptools on uvloop, so the generator
costs far less CPU per request than the server it measures (``generator_cpu_s``).
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import uvloop

from bridge_store.rpc.connect import CALL_STORE_PATH

from .loadgen import PERCENTILES, TIMEOUT_SECONDS, LoadResult
from .mix import Operation, Record, dynamic_values

#: A sender this much later than a request's due time counts as a late send.
LATE_SEND_SECONDS = 0.001
CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass(slots=True)
class _Request:
    due: float
    body: bytes
    op: str
    sent: float = 0.0


@dataclass
class OpenLoopResult:
    """What one open-loop run measured; ``load`` has the latency from the due time."""

    rate: float  # requests per second asked for
    load: LoadResult
    service_ms: dict[str, float]
    send_lag_ms: dict[str, float]
    late_sends: int
    generator_cpu_s: float
    #: (latency from due, service time) of each answered request, in seconds.
    samples: list[tuple[float, float]] = field(default_factory=list, repr=False)

    @property
    def achieved_rate(self) -> float:
        return self.load.ops_per_second

    def as_json(self) -> dict[str, Any]:
        return {
            "rate": round(self.rate, 1),
            **self.load.as_json(),
            "service_latency_ms": self.service_ms,
            "send_lag_ms": self.send_lag_ms,
            "late_sends": self.late_sends,
            "generator_cpu_s": round(self.generator_cpu_s, 2),
        }


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """min, mean, max and :data:`PERCENTILES` of ``samples`` (seconds) in milliseconds."""
    if not samples:
        return {}
    ordered = sorted(samples)
    result = {
        "min": ordered[0] * 1000,
        "mean": sum(ordered) / len(ordered) * 1000,
        "max": ordered[-1] * 1000,
    }
    for p in PERCENTILES:
        # The nearest-rank percentile; the epsilon keeps 99.9% of 1000 at rank 999.
        rank = max(1, math.ceil(p * len(ordered) / 100 - 1e-9))
        result[f"p{p:g}"] = ordered[rank - 1] * 1000
    return {name: round(value, 3) for name, value in result.items()}


class RequestSource:
    """The mix's requests in wrk's order, holes filled as the Lua script fills them.

    One generator thread in wrk's terms (thread 0 of 1): every active run is its own.
    """

    def __init__(
        self,
        ops: Sequence[Operation],
        order: Sequence[int],
        pools: Mapping[str, Sequence[Record]],
        *,
        tag: str,
    ) -> None:
        self._ops = ops
        self._order = order
        self._pools = pools
        self._tag = tag
        self._counter = 0
        self._picks: collections.Counter[str] = collections.Counter()
        self.sent: collections.Counter[str] = collections.Counter()
        self.appended: collections.Counter[str] = collections.Counter()

    def next(self) -> tuple[str, str]:
        """(operation name, body) of the next request."""
        self._counter += 1
        op = self._ops[self._order[(self._counter - 1) % len(self._order)]]
        pool = self._pools[op.pool]
        record = pool[self._picks[op.key] % len(pool)]
        self._picks[op.key] += 1
        appended = self.appended[record["RUN"]] if "RUN" in record else 0
        values = {**record, **dynamic_values(record, self._counter, 0, self._tag, appended)}
        self.sent[op.name] += 1
        if op.appends:
            self.appended[record["RUN"]] += 1
        return op.name, op.template.render(values)


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self.transport: asyncio.Transport | None = None
        self.current: _Request | None = None
        self._parser = httptools.HttpResponseParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail("read")
            if self.transport is not None:
                self.transport.abort()

    def on_message_complete(self) -> None:
        request, self.current = self.current, None
        if request is not None:
            self._run.completed(self, request, self._parser.get_status_code())

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._fail("read")
        self._run.lost(self)

    def _fail(self, kind: str) -> None:
        request, self.current = self.current, None
        if request is not None:
            self._run.failed(request, kind)

    def send(self, request: _Request, head: bytes) -> None:
        assert self.transport is not None
        assert self.current is None
        self.current = request
        request.sent = time.perf_counter()
        self.transport.write(head + b"%d\r\n\r\n" % len(request.body) + request.body)


class _Run:
    """The state of one open-loop run on the event loop."""

    def __init__(self, url: str, token: str, connections: int) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.head = (
            f"POST {CALL_STORE_PATH} HTTP/1.1\r\n"
            f"Host: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\n"
            "Connect-Protocol-Version: 1\r\n"
            f"Authorization: Bearer {token}\r\n"
            "Accept-Encoding: gzip, br\r\n"
            "Content-Length: "
        ).encode("latin-1")
        self.wanted = connections
        # Idle connections are taken oldest first, as wrk takes each in turn: taken
        # newest first, a run slower than the server kept the same one or two busy and
        # left the rest unused past serve's 10 s first-request deadline, whose 408 and
        # close could cross a request sent at that moment (read and status errors).
        self.idle: collections.deque[_Connection] = collections.deque()
        self.queue: collections.deque[_Request] = collections.deque()
        self.latency: list[float] = []
        self.service: list[float] = []
        self.lag: list[float] = []
        self.errors = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
        self.outstanding = 0
        self.drained = asyncio.Event()
        self.closing = False

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self), self.host, self.port
                )
        except (OSError, TimeoutError):
            self.errors["connect"] += 1
            return
        self._ready(connection)

    def submit(self, request: _Request) -> None:
        self.outstanding += 1
        self.drained.clear()
        self.queue.append(request)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.queue and self.idle:
            connection = self.idle.popleft()
            request = self.queue.popleft()
            self.lag.append(time.perf_counter() - request.due)
            connection.send(request, self.head)

    def _ready(self, connection: _Connection) -> None:
        if self.closing:
            if connection.transport is not None:
                connection.transport.close()
            return
        self.idle.append(connection)
        self._dispatch()

    def completed(self, connection: _Connection, request: _Request, status: int) -> None:
        now = time.perf_counter()
        latency = now - request.due
        if not 200 <= status < 300:
            self.errors["status"] += 1
        elif latency > TIMEOUT_SECONDS:
            self.errors["timeout"] += 1
        self.latency.append(latency)
        self.service.append(now - request.sent)
        self._done()
        self._ready(connection)

    def failed(self, request: _Request, kind: str) -> None:
        self.errors[kind] += 1
        self._done()

    def lost(self, connection: _Connection) -> None:
        if connection in self.idle:
            self.idle.remove(connection)
        if not self.closing:
            asyncio.get_running_loop().create_task(self.connect())

    def _done(self) -> None:
        self.outstanding -= 1
        if self.outstanding == 0:
            self.drained.set()

    def close(self, connections: list[_Connection]) -> None:
        self.closing = True
        for connection in connections:
            if connection.transport is not None:
                connection.transport.close()


async def _drive(
    url: str,
    token: str,
    source: RequestSource,
    *,
    rate: float,
    connections: int,
    duration: float,
) -> tuple[_Run, float]:
    run = _Run(url, token, connections)
    await asyncio.gather(*(run.connect() for _ in range(connections)))
    opened = list(run.idle)
    if not opened:
        raise RuntimeError(f"open loop: could not connect to {url}")
    total = int(rate * duration)
    start = time.perf_counter() + 0.01
    sent = 0
    while sent < total:
        now = time.perf_counter()
        while sent < total and start + sent / rate <= now:
            op, body = source.next()
            run.submit(_Request(start + sent / rate, body.encode("utf-8"), op))
            sent += 1
        if sent < total:
            await asyncio.sleep(max(0.0, start + sent / rate - time.perf_counter()))
    if run.outstanding:
        try:
            async with asyncio.timeout(TIMEOUT_SECONDS):
                await run.drained.wait()
        except TimeoutError:
            run.errors["timeout"] += run.outstanding
    elapsed = total / rate
    run.close(opened + list(run.idle))
    return run, elapsed


def run_open_loop(
    url: str,
    token: str,
    source: RequestSource,
    *,
    rate: float,
    connections: int,
    duration: float,
) -> OpenLoopResult:
    """Send ``rate`` requests a second for ``duration`` seconds over ``connections``."""
    if rate <= 0 or duration <= 0 or connections < 1:
        raise ValueError("need rate > 0, duration > 0 and connections >= 1")
    cpu_before = time.process_time()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        run, elapsed = runner.run(
            _drive(url, token, source, rate=rate, connections=connections, duration=duration)
        )
    load = LoadResult(
        requests=len(run.latency),
        duration_s=elapsed,
        errors=run.errors,
        latency_ms=percentiles(run.latency),
        sent=dict(source.sent),
        appended=dict(source.appended),
    )
    return OpenLoopResult(
        rate=rate,
        load=load,
        service_ms=percentiles(run.service),
        send_lag_ms=percentiles(run.lag),
        late_sends=sum(1 for lag in run.lag if lag > LATE_SEND_SECONDS),
        generator_cpu_s=time.process_time() - cpu_before,
        samples=list(zip(run.latency, run.service, strict=True)),
    )
