"""CPU time per CallStore call, in one process: the whole server path but the socket.

``python -m bench cpu-per-call`` feeds the realistic mix's requests, as wrk sends them
(bytes of HTTP/1.1), to the HTTP protocol ``serve`` runs (uvicorn's httptools
protocol under the HTTP guard, the settings of ``bridge-store serve``) on an
in-memory transport, one request at a time on one keep-alive connection, and divides
the process's CPU time (every thread, ``time.process_time``) by the calls answered.
Everything a call costs in Python and in the C extensions is in the figure: the HTTP
parser, uvicorn, the app, the backend, the event loop's turns; only the HTTP socket's
system calls and the wake-ups between two processes are not (a postgres or redis
target's round trips to its server are counted, on this process's side).

CPU time, unlike ops/s, hardly moves when other processes share the machine, so this
compares two commits, or two targets, on a busy machine. ``ceiling`` is
``bench.servers.ceiling_app`` on the same protocol: what no CallStore server on this
stack can go below. ``--profile`` prints the cProfile of the measured calls.
``--without-each`` measures the first target again with each layer of the path taken
out in turn (:mod:`bench.path_parts`): what each one costs a call.

``--bytecodes`` counts instead the Python bytecodes the measured calls execute, per
function: the same count on every run and every machine, whatever else runs beside
it, so a change of a few bytecodes a call shows where timings cannot (they move by
2-5% between runs). It says where the Python work is, not what the C extensions
(orjson, httptools) or the kernel cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.lifespan.on import LifespanOn
from uvicorn.server import ServerState

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.serving import UVICORN_SETTINGS
from testkit.services import postgres_database, redis_prefix

from . import mix, path_parts
from .bytecodes import BytecodeCounter, Recorder

TOKEN = "bench-cpu-per-call-" + "0" * 24
#: postgres and redis use the servers the tests use (testkit.services), each call a round
#: trip to them: their own CPU is not in the figure, the driver's is.
TARGETS = ("memory", "sqlite", "postgres", "redis", "ceiling")
#: Calls sent before the measured ones: imports, caches and the first pages are warm.
WARMUP_CALLS = 2000


@dataclass(frozen=True)
class Measured:
    """What ``calls`` measured calls of one target cost."""

    target: str
    calls: int
    cpu_seconds: float
    wall_seconds: float
    #: Answers other than HTTP 200 among the measured calls (conflicts of a replayed
    #: create, say): a row with any is not a clean measurement.
    failed: int

    @property
    def cpu_us_per_call(self) -> float:
        return self.cpu_seconds / self.calls * 1e6


class _Transport(asyncio.Transport):
    """The server side of a connection, in memory: collects what the server writes.

    ``answered`` is set once a whole response (head and ``content-length`` bytes of
    body) has been written.
    """

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.answered: asyncio.Future[int] | None = None
        self._closing = False

    def expect(self) -> asyncio.Future[int]:
        self.written.clear()
        self.answered = asyncio.get_running_loop().create_future()
        return self.answered

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data
        end = self.written.find(b"\r\n\r\n")
        if end < 0 or self.answered is None or self.answered.done():
            return
        head = bytes(self.written[:end]).lower()
        length = int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        if len(self.written) >= end + 4 + length:
            self.answered.set_result(int(head[9:12]))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8787)}.get(
            name, default
        )

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False


def http_request(body: bytes) -> bytes:
    """A CallStore request with the headers wrk's script sends (bench/loadgen.py)."""
    head = (
        f"POST {CALL_STORE_PATH} HTTP/1.1\r\n"
        "Host: 127.0.0.1:8787\r\n"
        "Content-Type: application/json\r\n"
        "Connect-Protocol-Version: 1\r\n"
        f"Authorization: Bearer {TOKEN}\r\n"
        "Accept-Encoding: gzip, br\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def mix_requests(
    world: mix.World, calls: int, phase: str, tag: str, mix_name: str = "realistic"
) -> list[bytes]:
    """``calls`` requests of ``mix_name`` on ``phase``'s records, as wrk sends them."""
    ops = mix.operations(mix_name)
    order = mix.schedule(ops)
    appended: dict[str, int] = {}
    requests = []
    for counter in range(1, calls + 1):
        op = ops[order[(counter - 1) % len(order)]]
        pool = world.pool(op.pool, phase)
        record = pool[counter % len(pool)]
        run = record.get("RUN", "")
        values = {**record, **mix.dynamic_values(record, counter, 0, tag, appended.get(run, 0))}
        if op.appends:
            appended[run] = appended.get(run, 0) + 1
        requests.append(http_request(op.template.render(values).encode()))
    return requests


def seed_requests(world: mix.World) -> list[bytes]:
    return [
        http_request(json.dumps({"substore": s, "method": m, "input": data}).encode())
        for s, m, data in world.calls
    ]


@contextlib.asynccontextmanager
async def _connection(app: Any) -> AsyncIterator[Callable[[bytes], Any]]:
    """A started app on serve's protocol; yields a function sending one request."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, **UVICORN_SETTINGS)
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    if lifespan.should_exit:
        raise RuntimeError("the app's lifespan failed to start")
    state = ServerState()
    state.default_headers = [(b"date", b"Mon, 01 Jan 2024 00:00:00 GMT"), (b"server", b"uvicorn")]
    # serve's protocol class (bridge_store.wire.http_guard), typed by uvicorn as a bare
    # asyncio.Protocol.
    protocol_class: Any = config.http_protocol_class
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = _Transport()
    protocol.connection_made(transport)

    async def send(request: bytes) -> int:
        answered = transport.expect()
        protocol.data_received(request)
        return await answered

    try:
        yield send
    finally:
        protocol.connection_lost(None)
        await lifespan.shutdown()


@contextlib.contextmanager
def _store_url(target: str) -> Iterator[str]:
    """A new, empty store of ``target``'s backend; removed afterwards.

    The ceiling has no store: it gets no URL, and touches no server.
    """
    if target == "memory":
        yield "memory://"
    elif target == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-cpu-per-call-") as directory:
            yield f"sqlite:///{Path(directory)}/bench.db"
    elif target == "postgres":
        with postgres_database() as url:
            yield url
    elif target == "redis":
        with redis_prefix() as url:
            yield url
    else:
        yield ""


def _app(target: str, url: str, without: frozenset[str]) -> Any:
    if target == "ceiling":
        from .servers import ceiling_app

        return ceiling_app()
    from bridge_store.server.app import create_app

    return create_app(path_parts.server_config(url, TOKEN, without))


async def _measure(
    target: str, calls: int, profile: Recorder | None, mix_name: str, without: frozenset[str]
) -> Measured:
    world = mix.build_world(active_runs=4)
    with _store_url(target) as url, path_parts.taken_out(without):
        async with _connection(_app(target, url, without)) as send:
            if target != "ceiling":
                for request in seed_requests(world):
                    status = await send(request)
                    if status != 200:
                        raise RuntimeError(f"seeding {target} answered HTTP {status}")
            for request in mix_requests(world, WARMUP_CALLS, "warmup", "00000001"):
                await send(request)
            measured = mix_requests(world, calls, "timed", "00000002", mix_name)
            failed = 0
            if profile is not None:
                profile.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            for request in measured:
                if await send(request) != 200:
                    failed += 1
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            if profile is not None:
                profile.disable()
    return Measured(path_parts.label(target, without), calls, cpu, wall, failed)


def run_loop(coroutine: Any) -> Any:
    """Run on the event loop ``serve`` uses: uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def measure(
    target: str,
    calls: int,
    profile: Recorder | None = None,
    mix_name: str = "realistic",
    without: frozenset[str] = frozenset(),
) -> Measured:
    """CPU per call of ``target`` (one of :data:`TARGETS`) over ``calls`` calls of a mix,
    with the parts ``without`` names taken out (:mod:`bench.path_parts`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; one of: {', '.join(TARGETS)}")
    result: Measured = run_loop(_measure(target, calls, profile, mix_name, without))
    return result


def interleaved(
    targets: Sequence[str | path_parts.Variant],
    calls: int,
    rounds: int,
    mix_name: str = "realistic",
) -> dict[str, list[Measured]]:
    """Each target ``rounds`` times, alternating, so a change of load hits them all;
    keyed by the measurement's label (:func:`bench.path_parts.label`)."""
    variants = [(t, frozenset()) if isinstance(t, str) else t for t in targets]
    results: dict[str, list[Measured]] = {path_parts.label(*v): [] for v in variants}
    for _ in range(rounds):
        for target, without in variants:
            measured = measure(target, calls, mix_name=mix_name, without=without)
            results[measured.target].append(measured)
    return results


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench cpu-per-call", description=__doc__)
    parser.add_argument("--targets", default="memory,ceiling", help="comma-separated")
    parser.add_argument("--calls", type=int, default=20_000, help="measured calls per round")
    parser.add_argument(
        "--mix", default="realistic", choices=mix.mix_names(), help="as bench load's --mix"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per target")
    parser.add_argument(
        "--profile", metavar="SORT", help="print the cProfile of one round, sorted by SORT"
    )
    parser.add_argument(
        "--bytecodes",
        metavar="TOP",
        type=int,
        help="count the bytecodes of one round instead; print the TOP functions",
    )
    parser.add_argument(
        "--without-each",
        action="store_true",
        help=f"measure the first target also without each of: {', '.join(path_parts.PARTS)}",
    )
    args = parser.parse_args(argv)
    targets = [target.strip() for target in args.targets.split(",") if target.strip()]
    unknown = [target for target in targets if target not in TARGETS]
    if unknown or args.calls < 1 or args.rounds < 1 or (args.bytecodes or 0) < 0:
        parser.error(
            f"targets are {', '.join(TARGETS)}; --calls and --rounds positive, "
            "--bytecodes not negative"
        )
    if args.without_each and (not targets or targets[0] == "ceiling"):
        parser.error("--without-each takes its parts out of the first target: not the ceiling")
    variants = [(target, frozenset[str]()) for target in targets]
    if args.without_each:
        variants[:1] = path_parts.each_part_out(targets[0])
    if args.bytecodes is not None:
        for target, without in variants:
            counter = BytecodeCounter()
            measure(target, args.calls, counter, args.mix, without)
            name = path_parts.label(target, without)
            print(f"{name} ({args.mix}):", *counter.report(args.calls, args.bytecodes), sep="\n")
        return 0
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.profile:
        for target, without in variants:
            profile = cProfile.Profile()
            result = measure(target, args.calls, profile, args.mix, without)
            print(f"{result.target}: {result.cpu_us_per_call:.1f} us CPU/call under cProfile")
            pstats.Stats(profile).sort_stats(args.profile).print_stats(40)
        return 0
    results = interleaved(variants, args.calls, args.rounds, args.mix)
    failed = False
    for target, rounds in results.items():
        figures = ", ".join(f"{r.cpu_us_per_call:.1f}" for r in rounds)
        best = min(r.cpu_us_per_call for r in rounds)
        bad = sum(r.failed for r in rounds)
        failed = failed or bad > 0
        print(f"{target:16} best {best:6.1f} us CPU/call (rounds: {figures}); non-200: {bad}")
    if "ceiling" in results:
        ceiling = min(r.cpu_us_per_call for r in results["ceiling"])
        for target, rounds in results.items():
            if target != "ceiling":
                ratio = min(r.cpu_us_per_call for r in rounds) / ceiling
                print(f"{target} / ceiling: {ratio:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0
