"""tokens.py and serve: where the bearer token comes from, and what is refused or warned."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bridge_store.errors import ConfigurationError
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.tokens import (
    DEFAULT_TOKEN_FILE,
    MIN_TOKEN_LENGTH,
    TOKEN_ENV,
    create_private,
    load_or_generate,
)
from bridge_store.server.config import READY_PREFIX

STRONG = "a-token-long-enough-for-serve"
SERVE_TIMEOUT_SECONDS = 30


def test_a_token_shorter_than_16_characters_is_refused(tmp_path: Path) -> None:
    short = "x" * (MIN_TOKEN_LENGTH - 1)
    with pytest.raises(ConfigurationError, match=r"15 characters long; use at least 16"):
        load_or_generate(None, {TOKEN_ENV: short})
    token_file = tmp_path / "token"
    token_file.write_text("y\n")
    token_file.chmod(0o600)
    with pytest.raises(ConfigurationError, match=r"auth token file .*token is 1 characters"):
        load_or_generate(str(token_file), {})
    assert load_or_generate(None, {TOKEN_ENV: "x" * MIN_TOKEN_LENGTH}).value == "x" * 16


def test_the_default_token_file_is_reused_and_created_only_when_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = load_or_generate(None, {})
    assert first.generated_file == tmp_path / DEFAULT_TOKEN_FILE
    assert stat.S_IMODE((tmp_path / DEFAULT_TOKEN_FILE).stat().st_mode) == 0o600
    # A restart: the clients' token still works.
    again = load_or_generate(None, {})
    assert (again.value, again.generated_file) == (first.value, None)


def test_a_token_file_another_process_created_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "token"
    assert create_private(path, "written-by-the-first-server")
    assert not create_private(path, "written-by-the-second-server")
    assert path.read_text() == "written-by-the-first-server\n"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_a_token_file_others_can_read_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge_store.security.tokens")
    token_file = tmp_path / "token"
    token_file.write_text(STRONG + "\n")
    token_file.chmod(0o640)
    assert load_or_generate(str(token_file), {}).value == STRONG
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"auth token file {token_file} can be read by other users (mode 640): "
        f"chmod 600 {token_file}"
    ]
    assert STRONG not in caplog.text
    caplog.clear()
    token_file.chmod(0o600)
    load_or_generate(str(token_file), {})
    assert caplog.records == []


def test_a_token_file_in_a_directory_that_cannot_be_written_is_one_line(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ConfigurationError) as caught:
        load_or_generate(str(blocked / "token"), {})
    assert str(caught.value).startswith(f"cannot create the auth token file {blocked / 'token'}")
    assert "--auth-token-file" in str(caught.value)


def _serve(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    return subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--store", "memory://", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ready(process: subprocess.Popen[str]) -> dict[str, str]:
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith(READY_PREFIX):
            ready: dict[str, str] = json.loads(line[len(READY_PREFIX) :])
            return ready
    raise AssertionError(f"serve exited with {process.wait()} before it was ready")


def test_a_second_serve_on_a_taken_port_leaves_the_first_ones_token_alone(
    tmp_path: Path,
) -> None:
    # It used to write a fresh ./bridge-store.token before finding the port taken: the
    # running server's clients then read a token it did not accept.
    first = _serve(tmp_path, "--port", "0")
    try:
        ready = _ready(first)
        token_file = tmp_path / DEFAULT_TOKEN_FILE
        token = token_file.read_text().strip()
        port = ready["url"].rsplit(":", 1)[1].strip("/")
        second = _serve(tmp_path, "--port", port)
        _, errors = second.communicate(timeout=SERVE_TIMEOUT_SECONDS)
        assert second.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in errors
        assert token_file.read_text().strip() == token
        answer = httpx.post(
            ready["url"] + CALL_STORE_PATH.lstrip("/"),
            json={"substore": "agents", "method": "list", "input": {}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=SERVE_TIMEOUT_SECONDS)
    # A restart reads the same file: the clients keep working.
    again = _serve(tmp_path, "--port", "0")
    try:
        ready = _ready(again)
        assert "authTokenFile" not in ready  # read, not generated
        assert token_file.read_text().strip() == token
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=SERVE_TIMEOUT_SECONDS)
