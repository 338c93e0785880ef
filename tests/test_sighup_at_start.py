"""A SIGHUP at any moment of serve's start (a supervisor reloading a fleet, a terminal
closing) never ends it: before serve installs its own handler, the command's first
code ignores SIGHUP (bridge_store/entry.py). Before that, a SIGHUP 0.3 s or 0.8 s
after launch ended serve with -1 (SIGHUP's default action).

The moments are taken by the CPU time serve has used, not by the clock, so that a
loaded machine moves nothing: after about 0.1 s of CPU Python has started and run
the command's first code (the interpreter's own start before it is the one window no
Python code can close); by 0.3 s it is loading the CLI, by 0.5 s opening stores or
starting uvicorn (its whole start takes about 0.7 s)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.config import READY_PREFIX
from bridge_store.security.tokens import TOKEN_ENV, new_token

#: Seconds of serve's CPU time at which the SIGHUP is sent.
CPU_SECONDS = (0.15, 0.3, 0.5)
READY_TIMEOUT_SECONDS = 60.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime, fields 14 and 15 of the whole line, in clock ticks.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for_cpu(server: subprocess.Popen[str], seconds: float) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while _cpu_seconds(server.pid) < seconds:
        assert server.poll() is None, f"serve ended before the SIGHUP: {server.poll()}"
        assert time.monotonic() < deadline
        time.sleep(0.002)


def _command(how: str) -> list[str]:
    if how == "script":
        script = shutil.which("bridge-store", path=str(Path(sys.executable).parent))
        assert script is not None
        return [script]
    return [sys.executable, "-m", "bridge_store"]


@pytest.mark.parametrize("cpu", CPU_SECONDS)
@pytest.mark.parametrize("how", ["script", "module"])
@pytest.mark.parametrize("tokens", ["one-token", "tokens-file"])
def test_a_sighup_during_the_start_never_ends_serve(
    tmp_path: Path, cpu: float, how: str, tokens: str
) -> None:
    token = new_token()
    env = {**os.environ, TOKEN_ENV: token}
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
    server = subprocess.Popen(
        [*_command(how), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_cpu(server, cpu)
        server.send_signal(signal.SIGHUP)
        assert server.stderr is not None
        started = time.monotonic()
        line = ""
        while not line.startswith(READY_PREFIX):
            line = server.stderr.readline()
            assert line or server.poll() is None, f"serve ended: {server.poll()}"
            assert time.monotonic() - started < READY_TIMEOUT_SECONDS
        assert server.poll() is None
        url = line.split('"url": "', 1)[1].split('"', 1)[0]
        assert httpx.get(url + "healthz", timeout=10).status_code == 200
        # And once it serves, a SIGHUP more ends nothing either.
        server.send_signal(signal.SIGHUP)
        time.sleep(0.2)
        assert httpx.get(url + "healthz", timeout=10).status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            status = server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
            server.communicate(timeout=10)
    assert status == 0
