"""A fake ``cursor-sdk-bridge`` and the ``bridge-store bridge`` command run as a subprocess.

The fake is shaped like the real launcher (a shell script running a program as its
child), records what it was given and whether it was stopped, and prints a ready line;
``fake_bridge`` is a fixture (a pytest plugin, ``tests/conftest.py``). The command runs
in a working directory of its own, where its embedded store keeps
``./bridge-store.token`` when the store is no SQLite file.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from bridge_store.security.tokens import TOKEN_ENV
from tests.support.processes import descendants

WAIT_SECONDS = 60.0

FAKE_BRIDGE = """
import json, os, signal, sys, tempfile
from pathlib import Path

record = Path(os.environ["FAKE_BRIDGE_DIR"])
mode = os.environ.get("FAKE_BRIDGE_MODE", "ready")
(record / "started.json").write_text(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ)}))


def stop(signum, frame):
    (record / "stopped").write_text(str(signum))
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
# Stands for the bridge ending on its own, with a status of its own.
signal.signal(signal.SIGUSR1, lambda signum, frame: sys.exit(5))
(record / "handling").write_text("")
print("fake bridge starting", file=sys.stderr, flush=True)
if mode == "crash":
    # As Node reports an error: one line, then its stack frames.
    print("boom", file=sys.stderr, flush=True)
    print("    at main (file:///bridge/dist/bin/cursor-sdk-bridge.js:59:26)", file=sys.stderr)
    print("    at async node:internal/modules/run_main:101:5", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "garbage":
    print("cursor-sdk-bridge ready {not json", file=sys.stderr, flush=True)
if mode == "ready":
    token = Path(tempfile.mkdtemp(prefix="cursor-sdk-bridge-"), "auth-token")
    token.write_text("bridge-token")
    ready = {
        "schemaVersion": 1, "transport": "tcp", "protocol": "connect",
        "host": "127.0.0.1", "port": 9, "url": "http://127.0.0.1:9",
        "authTokenFile": str(token), "pid": os.getpid(),
    }
    print("cursor-sdk-bridge ready " + json.dumps(ready), file=sys.stderr, flush=True)
while True:
    signal.pause()
"""


class FakeBridge:
    """Where the fake bridge reports what it was given and whether it was stopped."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.tmpdir = directory / "tmp"
        self.tmpdir.mkdir()
        program = directory / "fake_bridge.py"
        program.write_text(FAKE_BRIDGE)
        self.launcher = directory / "cursor-sdk-bridge"
        # Like the real launcher: the shell stays the parent of the actual program.
        self.launcher.write_text(f'#!/bin/sh\n"{sys.executable}" "{program}" "$@"\n')
        self.launcher.chmod(0o755)

    def env(self, mode: str = "ready") -> dict[str, str]:
        return {"FAKE_BRIDGE_DIR": str(self.directory), "FAKE_BRIDGE_MODE": mode}

    @property
    def command(self) -> list[str]:
        return [str(self.launcher)]

    def started(self) -> dict[str, Any]:
        recorded: dict[str, Any] = json.loads((self.directory / "started.json").read_text())
        return recorded

    def stopped(self) -> bool:
        return (self.directory / "stopped").exists()

    def handling_signals(self) -> bool:
        """Whether the fake has installed its signal handlers (and so records SIGTERM)."""
        return (self.directory / "handling").exists()


@pytest.fixture
def fake_bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBridge:
    fake = FakeBridge(tmp_path)
    # The fake writes its token file under $TMPDIR, as the real bridge does.
    monkeypatch.setenv("TMPDIR", str(fake.tmpdir))
    return fake


@dataclass
class BridgeCommand:
    process: subprocess.Popen[str]
    #: The discovery JSON the command printed on stdout.
    discovery: dict[str, Any]
    stderr: list[str]

    def children(self) -> set[int]:
        return descendants(self.process.pid)

    def store_pid(self) -> int:
        (pid,) = (
            pid
            for pid in self.children()
            if b"\0serve\0" in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        return pid


def _lines(stream: IO[str], into: queue.Queue[str | None], keep: list[str] | None) -> None:
    for line in stream:
        if keep is not None:
            keep.append(line)
        into.put(line)
    into.put(None)
    stream.close()


@contextmanager
def bridge_command(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> Iterator[BridgeCommand]:
    """Run ``bridge-store bridge *args`` until it prints the bridge's discovery JSON.

    In ``cwd``, else in a temporary directory removed afterwards.
    """
    with _working_directory(cwd) as directory:
        yield from _bridge_command(args, env, directory)


def _bridge_command(
    args: tuple[str, ...], env: dict[str, str], cwd: Path
) -> Iterator[BridgeCommand]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "bridge", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    stdout: queue.Queue[str | None] = queue.Queue()
    stderr: list[str] = []
    threading.Thread(target=_lines, args=(process.stdout, stdout, None), daemon=True).start()
    threading.Thread(
        target=_lines, args=(process.stderr, queue.Queue(), stderr), daemon=True
    ).start()
    try:
        line = stdout.get(timeout=WAIT_SECONDS)
        assert line is not None, "the command ended before the bridge was ready:\n" + "".join(
            stderr
        )
        yield BridgeCommand(process, json.loads(line), stderr)
    finally:
        # SIGTERM first: the command then stops what it started.
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def fake_command_env(fake: FakeBridge, mode: str = "ready", **extra: str) -> dict[str, str]:
    return {**without_store_token(), **fake.env(mode), **extra}


def without_store_token() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != TOKEN_ENV}


def run_bridge_command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    with _working_directory(None) as directory:
        return subprocess.run(
            [sys.executable, "-m", "bridge_store", "bridge", *args],
            env=env,
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
            check=False,
        )


@contextmanager
def _working_directory(given: Path | None) -> Iterator[Path]:
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="bridge-command-") as directory:
        yield Path(directory)
