"""Real servers to try health checks and probes on: one ready, one alive but not ready.

The second serves an empty SQLite file without migrating it: the process answers
(``/healthz``) but its schema is not at the latest revision (``/readyz`` is 503), as a
store whose database is unusable would.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bridge_store.client import Sidecar, start_serve

#: Where a probe command written for the image's port asks: http://127.0.0.1:PORT/PATH.
LOOPBACK_URL = re.compile(r"http://127\.0\.0\.1:(?P<port>\d+)(?P<path>/[\w/]*)")
PROBE_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class ProbeTargets:
    ready: Sidecar
    unready: Sidecar

    def http_status(self, server: Sidecar, path: str) -> int:
        return httpx.get(server.url.rstrip("/") + path, timeout=PROBE_TIMEOUT_SECONDS).status_code

    def run_command(self, server: Sidecar, command: Sequence[str]) -> int:
        """The exit status of an exec probe or HEALTHCHECK command (``python -c ...``)
        run against ``server``, with this interpreter and the server's port."""
        assert command[0] == "python", command
        port = str(httpx.URL(server.url).port)
        code = LOOPBACK_URL.sub(lambda m: m[0].replace(m["port"], port, 1), command[-1])
        result = subprocess.run(
            [sys.executable, *command[1:-1], code],
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
        return result.returncode


@contextmanager
def probe_targets(directory: Path) -> Iterator[ProbeTargets]:
    empty = f"sqlite:///{directory / 'never-migrated.db'}"
    (directory / "never-migrated.db").touch(mode=0o600)  # --no-migrate creates none
    with (
        start_serve(["--port", "0", "--store", "memory://"]) as ready,
        start_serve(["--port", "0", "--store", empty, "--no-migrate"]) as unready,
    ):
        yield ProbeTargets(ready, unready)
