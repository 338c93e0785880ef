"""Where ``serve`` takes its bearer token from, through the real command line.

``BRIDGE_STORE_AUTH_TOKEN`` wins over ``--auth-token-file`` (and a blank one does
not count); a token file that is empty or cannot be read stops the start with one
line naming the file, exit status 2, and is never replaced by a generated token.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from .support.server import CALL_STORE_PATH, serve

FILE_TOKEN = "token-from-the-file-0123456789abcdef"
ENV_TOKEN = "token-from-the-environment-0123456789"


def status_with(url: str, token: str) -> int:
    response = httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": "agents", "method": "get", "input": {"agentId": "a"}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    return response.status_code


def serve_with_token_file(path: Path, env_token: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BRIDGE_STORE_AUTH_TOKEN"}
    if env_token is not None:
        env["BRIDGE_STORE_AUTH_TOKEN"] = env_token
    args = ["serve", "--port", "0", "--store", "memory://", "--auth-token-file", str(path)]
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_environment_wins_over_the_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(FILE_TOKEN + "\n")
    with serve("--store", "memory://", "--auth-token-file", str(token_file), token=ENV_TOKEN) as s:
        assert "authTokenFile" not in s.ready
        assert status_with(s.url, ENV_TOKEN) == 200
        assert status_with(s.url, FILE_TOKEN) == 401
    assert token_file.read_text() == FILE_TOKEN + "\n"


def test_a_blank_environment_token_leaves_the_file_in_charge(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {FILE_TOKEN}  \n")
    with serve("--store", "memory://", "--auth-token-file", str(token_file), token=" \t ") as s:
        assert status_with(s.url, FILE_TOKEN) == 200
        assert status_with(s.url, "not-the-token") == 401


def assert_refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("bridge-store: ")
    assert message in line


def test_an_empty_token_file_is_refused_and_kept(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(" \n\n")
    assert_refused(
        serve_with_token_file(token_file, None), f"auth token file {token_file} is empty"
    )
    assert token_file.read_text() == " \n\n"
    # A blank environment token does not rescue it either.
    assert_refused(serve_with_token_file(token_file, "  "), "is empty")


def test_an_unreadable_token_file_is_refused(tmp_path: Path) -> None:
    # A directory stands for a file the server may not read: the tests run as root,
    # whom a mode of 000 does not stop.
    directory = tmp_path / "token"
    directory.mkdir()
    assert_refused(
        serve_with_token_file(directory, None), f"cannot read auth token file {directory}"
    )
    assert list(directory.iterdir()) == []


def test_a_token_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_bytes(b"\xff\xfe binary \x00\x80")
    assert_refused(serve_with_token_file(token_file, None), f"auth token file {token_file}")
    assert token_file.read_bytes() == b"\xff\xfe binary \x00\x80"


def test_the_environment_token_serves_even_when_the_file_is_unreadable(tmp_path: Path) -> None:
    directory = tmp_path / "token"
    directory.mkdir()
    with serve("--store", "memory://", "--auth-token-file", str(directory), token=ENV_TOKEN) as s:
        assert status_with(s.url, ENV_TOKEN) == 200
