"""Serve an ASGI app with a real uvicorn in a background thread, on a free port.

For tests that need objects a subprocess cannot share (a plugin backend defined in
the test, the server's log records); ``tests.support.server`` runs the real CLI.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 30.0


@contextmanager
def running(app: ASGIApp, **settings: Any) -> Iterator[str]:
    """Run ``app`` (lifespan included) and yield its base URL, ``http://127.0.0.1:PORT``.

    ``settings`` are more ``uvicorn.Config`` arguments (``http=``, ``timeout_keep_alive=``).
    """
    # log_config=None keeps uvicorn from reconfiguring logging under pytest's capture.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, lifespan="on", **settings
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(STOP_TIMEOUT_SECONDS)
            raise AssertionError("uvicorn did not start (see the captured log)")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT_SECONDS)
        assert not thread.is_alive(), "uvicorn did not stop"
