"""Tokens and key files that are not what they should be: one line, never a traceback.

At start a tokens or key file that is not UTF-8, or a tokens file nested 100,000
deep, stops the command with one line and exit status 2. At a reload, the server keeps
the tokens it has, logs one line, and every call goes on answering. A deleted tokens
file keeps the last tokens read (see docs/security.md, "Deleting the tokens file").
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.security.auth import Scope, TokenRegistry
from bridge_store.security.tokens_file import add_token, load_entries, render
from tests.support.server import CALL_STORE_PATH, serve

#: Not UTF-8: a Latin-1 "é" in a name.
NOT_UTF8 = b'[[token]]\nname = "caf\xe9"\n'
#: Arrays nested 100,000 deep (tomllib recursed until RecursionError).
DEEP = b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
HOSTILE = {"not-utf8": NOT_UTF8, "nested-100000-deep": DEEP}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_serve_with_a_non_utf8_or_deeply_nested_tokens_file_is_one_line(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_bytes(content)
    result = run_cli("serve", "--port", "0", "--store", "memory://", "--tokens-file", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert str(path) in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_reload_of_a_non_utf8_or_deep_tokens_file_keeps_the_tokens_and_logs_one_line(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    clock = Clock()
    registry = TokenRegistry(load_entries(path), path=path, loader=load_entries, clock=clock)
    path.write_bytes(content)
    with caplog.at_level(logging.INFO, logger="bridge_store.security.auth"):
        for _ in range(5):  # the calls of five seconds: each answered, one line logged
            clock.now += 1.1
            assert registry.resolve(alice.encode()) is not None
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert "previous tokens stay" in record.getMessage()
    assert "\n" not in record.getMessage()


def call_status(url: str, token: str) -> int:
    response = httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": "agents", "method": "list", "input": {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    return response.status_code


def test_serve_keeps_answering_when_its_tokens_file_turns_non_utf8(tmp_path: Path) -> None:
    """The issue's symptom: every call failed with `internal` about once a second."""
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    with serve("--store", "memory://", tokens_file=path, token=alice) as server:
        path.write_bytes(NOT_UTF8)
        statuses = []
        deadline = time.monotonic() + 3.5  # three and more of the once-a-second checks
        while time.monotonic() < deadline:
            statuses.append(call_status(server.url, alice))
            time.sleep(0.05)
        # The good file again: read at the next check.
        bob = add_token(tmp_path / "good.toml", "bob", tenant="team-b", scope=Scope.READ)
        os.replace(tmp_path / "good.toml", path)
        deadline = time.monotonic() + 10
        while call_status(server.url, bob) != 200:
            assert time.monotonic() < deadline, "the fixed file was never read"
            time.sleep(0.1)
        assert call_status(server.url, alice) == 401
        logged = [line for line in server.stderr_lines if "not reloaded" in line]
    assert set(statuses) == {200}
    assert len(logged) == 1, logged


def test_a_deleted_tokens_file_keeps_the_last_tokens_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleting is no revocation: an empty tokens file is (see docs/security.md)."""
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    clock = Clock()
    registry = TokenRegistry(load_entries(path), path=path, loader=load_entries, clock=clock)
    path.unlink()
    with caplog.at_level(logging.INFO, logger="bridge_store.security.auth"):
        for _ in range(3):
            clock.now += 1.1
            assert registry.resolve(alice.encode()) is not None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "is gone" in record.getMessage()
    assert "empty tokens file" in record.getMessage()
    # An empty tokens file refuses every token at the next check.
    path.write_text(render([]))
    clock.now += 1.1
    assert registry.resolve(alice.encode()) is None


def test_serve_refuses_to_start_without_its_tokens_file(tmp_path: Path) -> None:
    missing = tmp_path / "tokens.toml"
    result = run_cli("serve", "--port", "0", "--store", "memory://", "--tokens-file", str(missing))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"bridge-store: cannot read tokens file {missing}: No such file or directory"
    ]


def key_file_commands(tmp: Path) -> dict[str, list[str]]:
    """Every command that reads a key file, with what else it needs to get that far."""
    sqlite = f"sqlite:///{tmp}/store.db"
    archive = tmp / "archive.tar"
    return {
        "serve": ["serve", "--port", "0", "--store", "memory://"],
        "keys generate": ["keys", "generate"],
        "keys rotate": ["keys", "rotate", "--store", "memory://"],
        "ui": ["ui", "--port", "0", "--store", sqlite],
        "agents": ["agents", "--store", sqlite],
        "runs": ["runs", "agent-1", "--store", sqlite],
        "transcript": ["transcript", "run-1", "--store", sqlite],
        "export": ["export", "--store", sqlite, "--output", str(archive)],
        "import": ["import", "--store", sqlite, "--input", str(archive)],
        "copy --from": [
            "copy",
            "--from",
            sqlite,
            "--to",
            "memory://",
            "--from-encryption-key-file",
            str(tmp / "key"),
        ],
        "copy --to": [
            "copy",
            "--from",
            "memory://",
            "--to",
            sqlite,
            "--to-encryption-key-file",
            str(tmp / "key"),
        ],
    }


@pytest.mark.parametrize("command", list(key_file_commands(Path("/x"))))
def test_a_key_file_that_is_not_utf8_is_one_line_for_every_command(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"\xff\xfe" + secrets.token_bytes(30))
    key.chmod(0o600)
    store = f"sqlite:///{tmp_path}/store.db"
    assert main(["db", "upgrade", "--store", store]) == 0
    # An archive for import to read (written without a key).
    assert main(["export", "--store", store, "--output", str(tmp_path / "archive.tar")]) == 0
    capsys.readouterr()
    args = key_file_commands(tmp_path)[command]
    if not command.startswith("copy"):
        args = [*args, "--encryption-key-file", str(key)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"bridge-store: encryption key file {key} is not UTF-8 text (byte 0): it holds keys "
        "as hex or base64, one per line ('bridge-store keys generate' writes one)"
    ]
    assert key.read_bytes().startswith(b"\xff\xfe")  # keys generate left it alone


def test_serve_with_its_tokens_file_deleted_keeps_answering_until_an_empty_one_comes(
    tmp_path: Path,
) -> None:
    """What docs/security.md says deleting the file does, on a real server: nothing is
    revoked, one warning is logged (a SIGHUP meanwhile changes neither), and only an
    empty tokens file refuses every token."""
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    with serve("--store", "memory://", tokens_file=path, token=alice) as server:
        path.unlink()
        statuses = []
        deadline = time.monotonic() + 3.5  # three and more of the once-a-second checks
        while time.monotonic() < deadline:
            statuses.append(call_status(server.url, alice))
            time.sleep(0.05)
        server.process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        statuses.append(call_status(server.url, alice))
        gone = [line for line in server.stderr_lines if "is gone" in line]
        path.write_text(render([]))
        deadline = time.monotonic() + 10
        while call_status(server.url, alice) != 401:
            assert time.monotonic() < deadline, "the empty tokens file never took effect"
            time.sleep(0.1)
    assert set(statuses) == {200}
    # One at the check that found it gone, one for the SIGHUP's read: never one a second.
    assert 1 <= len(gone) <= 2, gone
    assert all("write an empty tokens file" in line for line in gone)
