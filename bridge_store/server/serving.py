"""Running an ASGI app under uvicorn, as ``serve`` and ``ui`` do: the listening
socket, uvicorn's settings, the ready line, and a clean exit on a stop signal.

Apart from :mod:`.serve` so that building the command line (every command, ``--help``
too) does not load uvicorn: only the commands that serve import this.
"""

from __future__ import annotations

import asyncio
import errno
import json
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

import uvicorn

from ..errors import ConfigurationError
from ..wire.http_guard import guarded_protocol
from ..wire.http_limits import HttpLimits
from .config import READY_PREFIX

#: How long in-flight requests may take to finish after SIGTERM/SIGINT.
GRACEFUL_SHUTDOWN_SECONDS = 30

#: uvicorn settings of ``serve`` besides logging (the bench's ceiling runs on them too).
UVICORN_SETTINGS: dict[str, Any] = {
    "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS,
    "lifespan": "on",
    # Client addresses only ever reach the access log, so X-Forwarded-For is not worth
    # uvicorn's middleware on every call (~2% of the CPU of a small one).
    "proxy_headers": False,
    # Bounds on request heads, slow clients and open connections (http_guard.py);
    # serve replaces the protocol with one whose connection cap fits its file limit.
    "http": guarded_protocol(HttpLimits()),
    "timeout_keep_alive": HttpLimits().keep_alive_timeout,
}


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that announces itself once it is accepting connections."""

    def __init__(self, config: uvicorn.Config, announce: Callable[[], None]) -> None:
        super().__init__(config)
        self._announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._announce()


def run_announcing(
    config: uvicorn.Config,
    ready: dict[str, str],
    listener: socket.socket,
    before: Callable[[], Awaitable[None]] | None = None,
    announce: Callable[[], None] | None = None,
) -> int:
    """Serve ``config``'s app on ``listener``, print the ready line, stop on a signal.

    ``before`` runs first, on the server's event loop (the backends' connections
    belong to it): what it raises stops the start, as it is, with no server output.
    ``announce`` replaces printing the ready line (a worker of ``serve --workers``
    tells its parent instead).
    """

    def print_ready() -> None:
        print(READY_PREFIX + json.dumps(ready), file=sys.stderr, flush=True)

    server = _AnnouncingServer(config, announce or print_ready)

    async def main() -> None:
        if before is not None:
            await before()
        # uvicorn re-raises the stop signal after its graceful shutdown, under whatever
        # handler was installed before it started; handlers that just return make a
        # completed graceful stop exit 0, as process supervisors expect. Until then,
        # the default handlers stop a start that hangs.
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop_signal, _stopped)
        await server.serve(sockets=[listener])

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(main())
    # Stopped. A stop signal still on its way (a supervisor that sends SIGTERM again
    # once the answer it waited for came) must not turn this clean exit into a kill:
    # Python puts the default handlers back while it finalizes, but leaves SIG_IGN.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, signal.SIG_IGN)
    return 0 if server.started else 1


def _stopped(signum: int, frame: FrameType | None) -> None:
    """Runs only after uvicorn has shut down; the process then exits normally."""


def listen(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port must be between 0 and 65535, not {port}")
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = info[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        reason = error.strerror or str(error)
        fix = _LISTEN_FIXES.get(error.errno, _HOST_FIX)
        raise ConfigurationError(f"cannot listen on {host}:{port} ({reason}): {fix}") from None
    return listener


_HOST_FIX = "check --host, an address of this machine"
#: What to do when the port cannot be bound, by errno; anything else is about the host
#: (a name that does not resolve, an address this machine does not have).
_LISTEN_FIXES: dict[int | None, str] = {
    errno.EADDRINUSE: "another process holds the port; stop it or choose another --port",
    errno.EACCES: "this user may not bind that port; choose --port 1024 or above",
    errno.EADDRNOTAVAIL: _HOST_FIX,
}
