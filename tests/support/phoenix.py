"""Arize Phoenix as a real OTLP receiver: ``phoenix serve`` in its own working directory,
on free ports, and its REST API read back.

Phoenix lives in a virtualenv of its own (``scripts/ensure-phoenix``, which the fixture
runs: quick once installed), since it pins its own OpenTelemetry releases.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from testkit.services import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
ENSURE = ROOT / "scripts" / "ensure-phoenix"
#: ``phoenix serve`` migrates its database and loads its app: tens of seconds, more on
#: a busy machine.
START_SECONDS = 300.0


def phoenix_binary() -> Path:
    """Where ``scripts/ensure-phoenix`` puts ``phoenix`` (the version its script pins)."""
    version = re.search(r'PHOENIX_VERSION="([^"]+)"', ENSURE.read_text())
    assert version is not None
    cache = os.environ.get("BRIDGE_STORE_TEST_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bridge-store"
    )
    return Path(cache) / f"phoenix-{version.group(1)}" / "bin" / "phoenix"


@dataclass
class Phoenix:
    url: str
    process: subprocess.Popen[bytes]

    def spans(self, project: str, **params: str) -> list[dict[str, Any]]:
        """Every span of ``project`` (none while it does not exist), through REST."""
        spans: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {"limit": "1000", **params, **({"cursor": cursor} if cursor else {})}
            answer = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=query, timeout=30)
            if answer.status_code == 404:
                return []
            answer.raise_for_status()
            body = answer.json()
            spans += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                return spans

    def project_id(self, name: str) -> str:
        answer = httpx.get(f"{self.url}/v1/projects/{name}", timeout=30)
        answer.raise_for_status()
        project_id: str = answer.json()["data"]["id"]
        return project_id

    def wait_for_spans(
        self, project: str, count: int, seconds: float = 120.0
    ) -> list[dict[str, Any]]:
        """The project's spans once there are ``count`` of them (Phoenix inserts in batches)."""
        deadline = time.monotonic() + seconds
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.5)


@contextmanager
def running_phoenix(working_dir: Path) -> Iterator[Phoenix]:
    """``phoenix serve`` on free loopback ports with ``working_dir`` as its home."""
    subprocess.run([str(ENSURE)], check=True, timeout=1800)
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(working_dir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        # Nothing leaves the machine: no telemetry of Phoenix's own.
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (working_dir / "phoenix.log").open("wb")
    process = subprocess.Popen(
        [str(phoenix_binary()), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    phoenix = Phoenix(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, (working_dir / "phoenix.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "phoenix serve did not start"
            try:
                if httpx.get(f"{phoenix.url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield phoenix
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        log.close()
