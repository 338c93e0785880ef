"""A loopback TCP proxy that can fake the network failures a shared service must not see.

Tests put it between a backend and the machine's shared Postgres, Redis or S3 server
and then, without touching that server:

- :meth:`FaultyProxy.blackhole`: a partition. Open connections stay open but carry
  nothing more either way, and new ones are accepted and never forwarded, as when
  packets are dropped (nothing is refused, so only timeouts can end a wait);
- :meth:`FaultyProxy.reset`: every open connection is cut with a TCP reset;
- :meth:`FaultyProxy.heal`: forward again.

It runs its own event loop in a thread, so it serves sync tests, async tests and
server subprocesses alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
_CALL_TIMEOUT_SECONDS = 30.0


class FaultyProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` until told to fail."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._blackholed = False
        self.port = self._call(self._listen)

    def _call(self, factory: Callable[[], Awaitable[T]]) -> T:
        return asyncio.run_coroutine_threadsafe(_run(factory), self._loop).result(
            timeout=_CALL_TIMEOUT_SECONDS
        )

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def blackhole(self) -> None:
        """Drop everything from now on; connections stay open, new ones are accepted."""

        async def start() -> None:
            self._blackholed = True

        self._call(start)

    def heal(self) -> None:
        """Forward again (connections opened while blackholed stay dead)."""

        async def stop() -> None:
            self._blackholed = False

        self._call(stop)

    def reset(self) -> None:
        """Cut every open connection with a reset; new ones are forwarded."""

        async def cut() -> None:
            for writer in list(self._writers):
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    # SO_LINGER with a zero timeout: close() sends RST, not FIN.
                    with contextlib.suppress(OSError):
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                        )
                writer.transport.abort()
            self._writers.clear()

        self._call(cut)

    def close(self) -> None:
        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()
            # The pumps end on their own once their sockets are gone.
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=_CALL_TIMEOUT_SECONDS)

        self._call(shut)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CALL_TIMEOUT_SECONDS)
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._writers.add(writer)
        if self._blackholed:
            return  # accepted, never forwarded: the client waits for nothing
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(upstream_writer)
        await asyncio.gather(
            self._pump(reader, upstream_writer),
            self._pump(upstream_reader, writer),
            return_exceptions=True,
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self._blackholed:
                    continue  # dropped, as a partition drops packets
                writer.write(data)
                await writer.drain()
        finally:
            if not self._blackholed:
                writer.close()


async def _run(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()
