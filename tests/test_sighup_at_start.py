"""A SIGHUP at any moment of serve's start (a supervisor reloading a fleet, a terminal
closing) never ends it: before serve installs its own handler, the command's first
code ignores SIGHUP (bridge_store/entry.py). Before that, a SIGHUP 0.3 s or 0.8 s
after launch ended serve with -1 (SIGHUP's default action).

The moments are taken by the CPU time serve has used, not by the clock, so that a
loaded machine moves nothing. They are fractions of the CPU time a whole start takes,
measured once on this machine: a fixed figure (it was 0.5 s) outran the start on a
faster machine, which then sat ready and idle below it until the test timed out. At
a fifth of the start Python has run the command's first code (the interpreter's own
start before it is the one window no Python code can close); at half it is loading
the CLI, at four fifths opening stores or starting uvicorn. Should a start finish
before its moment all the same, the SIGHUP goes at the ready line, the start's last
moment."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.security.tokens import TOKEN_ENV, new_token
from bridge_store.server.config import READY_PREFIX
from tests.support.processes import cpu_seconds

#: Fractions of a whole start's CPU time at which the SIGHUP is sent.
START_FRACTIONS = (0.2, 0.5, 0.8)
READY_TIMEOUT_SECONDS = 60.0


class _Serve:
    """One `serve` process whose stderr a thread reads line by line, so that waiting
    for a CPU moment can also notice that the start has already ended."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put("")  # end of file: serve has closed stderr

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def wait_for_cpu_or_ready(self, seconds: float) -> str | None:
        """Return once serve has used `seconds` of CPU (None), or with its ready line
        if the start ended first."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while self.cpu_seconds() < seconds:
            assert self.process.poll() is None, f"serve ended: {self.process.poll()}"
            assert time.monotonic() < deadline, "serve neither used the CPU nor started"
            try:
                line = self.lines.get(timeout=0.002)
            except queue.Empty:
                continue
            if line.startswith(READY_PREFIX):
                return line
        return None

    def ready_line(self) -> str:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "serve printed no ready line"
            line = self.lines.get(timeout=left)
            assert line, f"serve ended: {self.process.wait(timeout=10)}"
            if line.startswith(READY_PREFIX):
                return line

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=10)
            self._reader.join(timeout=10)
            assert self.process.stderr is not None
            self.process.stderr.close()


def _command(how: str) -> list[str]:
    if how == "script":
        script = shutil.which("bridge-store", path=str(Path(sys.executable).parent))
        assert script is not None
        return [script]
    return [sys.executable, "-m", "bridge_store"]


def _serve(tmp_path: Path, how: str, tokens: str) -> _Serve:
    env = {**os.environ, TOKEN_ENV: new_token()}
    args = ["serve", "--port", "0", "--store", f"sqlite:///{tmp_path / 'store.db'}"]
    if tokens == "tokens-file":
        env.pop(TOKEN_ENV)
        tokens_file = tmp_path / "tokens.toml"
        subprocess.run(
            [sys.executable, "-m", "bridge_store", "token", "add", "ci", "--tokens-file",
             str(tokens_file), "--tenant", "default", "--scope", "write"],
            check=True, capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        args += ["--tokens-file", str(tokens_file)]
    return _Serve([*_command(how), *args], env)


@pytest.fixture(scope="module")
def start_cpu_seconds(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The CPU time one whole start of serve takes on this machine, up to its ready
    line (the longer of the two ways of passing tokens)."""
    measured = []
    for tokens in ("one-token", "tokens-file"):
        server = _serve(tmp_path_factory.mktemp(f"start-{tokens}"), "module", tokens)
        try:
            server.ready_line()
            measured.append(server.cpu_seconds())
        finally:
            assert server.stop() == 0
    return max(measured)


def test_the_start_is_measured_long_enough_to_have_moments(start_cpu_seconds: float) -> None:
    # Below a fifth of a second of CPU the interpreter's own start is most of it, and
    # the fractions would all fall before the command's first code ran.
    assert start_cpu_seconds > 0.2


@pytest.mark.parametrize("fraction", START_FRACTIONS)
@pytest.mark.parametrize("how", ["script", "module"])
@pytest.mark.parametrize("tokens", ["one-token", "tokens-file"])
def test_a_sighup_during_the_start_never_ends_serve(
    tmp_path: Path, start_cpu_seconds: float, fraction: float, how: str, tokens: str
) -> None:
    server = _serve(tmp_path, how, tokens)
    try:
        ready = server.wait_for_cpu_or_ready(start_cpu_seconds * fraction)
        server.process.send_signal(signal.SIGHUP)
        line = ready or server.ready_line()
        assert server.process.poll() is None
        url = line.split('"url": "', 1)[1].split('"', 1)[0]
        assert httpx.get(url + "healthz", timeout=10).status_code == 200
        # And once it serves, a SIGHUP more ends nothing either.
        server.process.send_signal(signal.SIGHUP)
        time.sleep(0.2)
        assert httpx.get(url + "healthz", timeout=10).status_code == 200
    finally:
        status = server.stop()
    assert status == 0
