"""The bundled client: launching the bridge, its sidecar, and the bridge-store bridge command.

Most tests run a fake bridge shaped like the real launcher (a shell script that runs
the actual program as its child) so they can check the command line, environment and
shutdown the client gives it; the last ones drive the real bridge.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import cursor_sdk
import httpx
import pytest

from bridge_store.client import (
    BRIDGE_READY_PREFIX,
    INSTALL_HINT,
    bridge_argv,
    bridge_main,
    bridge_path,
    launch_bridge,
    local_options,
    read_auth_token,
    start_sidecar,
)
from bridge_store.errors import ConfigurationError
from bridge_store.tokens import TOKEN_ENV
from tests.support.cursor_api import MODEL_ID, CursorApiStub

STORE_URL = "http://127.0.0.1:9/"
STORE_TOKEN = "store-token"
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
print("fake bridge starting", file=sys.stderr, flush=True)
if mode == "crash":
    print("boom", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "garbage":
    print("cursor-sdk-bridge ready {not json", file=sys.stderr, flush=True)
if mode in ("ready", "exit-after-ready"):
    token = Path(tempfile.mkdtemp(prefix="cursor-sdk-bridge-"), "auth-token")
    token.write_text("bridge-token")
    ready = {
        "schemaVersion": 1, "transport": "tcp", "protocol": "connect",
        "host": "127.0.0.1", "port": 9, "url": "http://127.0.0.1:9",
        "authTokenFile": str(token), "pid": os.getpid(),
    }
    print("cursor-sdk-bridge ready " + json.dumps(ready), file=sys.stderr, flush=True)
if mode == "exit-after-ready":
    sys.exit(5)
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


@pytest.fixture
def fake_bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBridge:
    fake = FakeBridge(tmp_path)
    # The fake writes its token file under $TMPDIR, as the real bridge does.
    monkeypatch.setenv("TMPDIR", str(fake.tmpdir))
    return fake


# -- options and command line ---------------------------------------------------------


def test_local_options_put_the_agent_in_the_custom_store(tmp_path: Path) -> None:
    assert local_options(tmp_path) == {"cwd": str(tmp_path), "store": {"type": "custom"}}


def test_bridge_argv_points_the_bridge_at_the_store(tmp_path: Path) -> None:
    argv = bridge_argv(
        STORE_URL,
        STORE_TOKEN,
        command=["bridge"],
        host="0.0.0.0",
        port=7000,
        workspace=tmp_path,
        state_root=tmp_path / "state",
        verbose=True,
    )
    assert argv == [
        "bridge",
        "--store-callback-url", STORE_URL,
        "--store-callback-auth-token", STORE_TOKEN,
        "--local-store", '{"type":"custom"}',
        "--host", "0.0.0.0",
        "--port", "7000",
        "--workspace", str(tmp_path),
        "--state-root", str(tmp_path / "state"),
        "--verbose",
    ]  # fmt: skip


def test_bridge_path_is_the_launcher_in_the_installed_sdk() -> None:
    path = Path(bridge_path())
    assert path.name == "cursor-sdk-bridge"
    assert os.access(path, os.X_OK)


def test_without_cursor_sdk_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cursor_sdk", None)
    with pytest.raises(ConfigurationError, match=INSTALL_HINT.replace("[", r"\[")):
        launch_bridge(STORE_URL, STORE_TOKEN)


# -- launching ------------------------------------------------------------------------


def test_launch_reads_the_ready_line_and_the_token_file(fake_bridge: FakeBridge) -> None:
    with launch_bridge(
        "http://127.0.0.1:9", STORE_TOKEN, command=fake_bridge.command, env=fake_bridge.env()
    ) as bridge:
        assert bridge.url == "http://127.0.0.1:9"
        assert bridge.auth_token == "bridge-token"
        assert bridge.ready["pid"] != bridge.process.pid  # the launcher's child
        # The store URL gains the trailing slash the bridge joins paths onto.
        assert bridge.store_url == STORE_URL
        assert fake_bridge.started()["argv"][:6] == [
            "--store-callback-url", STORE_URL,
            "--store-callback-auth-token", STORE_TOKEN,
            "--local-store", '{"type":"custom"}',
        ]  # fmt: skip
        assert "fake bridge starting\n" in bridge.stderr_tail()


def test_store_tokens_stay_out_of_the_bridge_environment(
    fake_bridge: FakeBridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRIDGE_STORE_AUTH_TOKEN", "inherited")
    monkeypatch.setenv("CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN", "inherited")
    env = {**fake_bridge.env(), "CURSOR_SDK_STORE_CALLBACK_TOKEN": "given", "EXTRA": "kept"}
    with launch_bridge(STORE_URL, STORE_TOKEN, command=fake_bridge.command, env=env):
        bridge_env = fake_bridge.started()["env"]
    assert bridge_env["EXTRA"] == "kept"
    assert not {
        "BRIDGE_STORE_AUTH_TOKEN",
        "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
        "CURSOR_SDK_STORE_CALLBACK_TOKEN",
    } & set(bridge_env)


def test_close_stops_the_program_behind_the_launcher_and_removes_the_token(
    fake_bridge: FakeBridge,
) -> None:
    bridge = launch_bridge(
        STORE_URL, STORE_TOKEN, command=fake_bridge.command, env=fake_bridge.env()
    )
    token_file = Path(bridge.ready["authTokenFile"])
    assert token_file.exists()
    bridge.close()
    assert fake_bridge.stopped()
    assert not token_file.parent.exists()
    assert list(fake_bridge.tmpdir.iterdir()) == []


def test_a_bridge_that_exits_early_is_reported_with_its_output(fake_bridge: FakeBridge) -> None:
    with pytest.raises(ConfigurationError, match="exited with status 3") as raised:
        launch_bridge(
            STORE_URL, STORE_TOKEN, command=fake_bridge.command, env=fake_bridge.env("crash")
        )
    assert "boom" in str(raised.value)


def test_a_bridge_that_never_gets_ready_is_stopped(fake_bridge: FakeBridge) -> None:
    with pytest.raises(ConfigurationError, match=r"no ready line within 0\.5s"):
        launch_bridge(
            STORE_URL,
            STORE_TOKEN,
            command=fake_bridge.command,
            env=fake_bridge.env("silent"),
            timeout=0.5,
        )
    assert fake_bridge.stopped()


def test_an_unreadable_ready_line_is_an_error(fake_bridge: FakeBridge) -> None:
    with pytest.raises(ConfigurationError, match="unreadable ready line"):
        launch_bridge(
            STORE_URL, STORE_TOKEN, command=fake_bridge.command, env=fake_bridge.env("garbage")
        )
    assert fake_bridge.stopped()


def test_a_missing_launcher_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot start cursor-sdk-bridge"):
        launch_bridge(STORE_URL, STORE_TOKEN, command=[str(tmp_path / "missing")])


# -- the bridge command ---------------------------------------------------------------


def test_auth_token_comes_from_the_environment_first(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert read_auth_token(token_file, {"BRIDGE_STORE_AUTH_TOKEN": "from-env"}) == "from-env"
    assert read_auth_token(token_file, {}) == "from-file"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read auth token file"), ("\n", "is empty")],
)
def test_auth_token_file_problems_are_configuration_errors(
    tmp_path: Path, content: str | None, message: str
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        read_auth_token(token_file, {})


def test_bridge_main_needs_a_token() -> None:
    with pytest.raises(ConfigurationError, match="no store token"):
        bridge_main(STORE_URL, None, environ={})


@contextmanager
def bridge_command(
    *args: str, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """Run ``bridge-store bridge *args``; yields it with its passed-through ready line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "bridge", *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)
        stream.close()

    assert process.stderr is not None
    threading.Thread(target=pump, args=(process.stderr,), daemon=True).start()
    try:
        seen: list[str] = []
        while (line := lines.get(timeout=WAIT_SECONDS)) is not None:
            seen.append(line)
            if line.startswith(BRIDGE_READY_PREFIX):
                break
        assert line is not None, "the command ended before the bridge was ready:\n" + "".join(seen)
        yield process, json.loads(line[len(BRIDGE_READY_PREFIX) :])
    finally:
        # SIGTERM first: the command then stops the bridge it started.
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def without_store_token() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != TOKEN_ENV}


def test_bridge_command_passes_the_ready_line_through_and_stops_on_sigterm(
    fake_bridge: FakeBridge,
) -> None:
    env = {
        **os.environ,
        **fake_bridge.env(),
        "CURSOR_SDK_BRIDGE_BIN": str(fake_bridge.launcher),
        TOKEN_ENV: STORE_TOKEN,
    }
    with bridge_command("--store-url", STORE_URL, env=env) as (process, ready):
        assert ready["url"] == "http://127.0.0.1:9"
        process.send_signal(signal.SIGTERM)
        assert process.wait(WAIT_SECONDS) == 0
    assert fake_bridge.stopped()
    started = fake_bridge.started()
    assert started["argv"][:4] == [
        "--store-callback-url", STORE_URL,
        "--store-callback-auth-token", STORE_TOKEN,
    ]  # fmt: skip
    assert TOKEN_ENV not in started["env"]


def test_bridge_command_exits_with_the_bridge(fake_bridge: FakeBridge) -> None:
    env = {
        **os.environ,
        **fake_bridge.env("exit-after-ready"),
        "CURSOR_SDK_BRIDGE_BIN": str(fake_bridge.launcher),
        TOKEN_ENV: STORE_TOKEN,
    }
    with bridge_command("--store-url", STORE_URL, env=env) as (process, _):
        assert process.wait(WAIT_SECONDS) == 5


def test_bridge_command_without_a_token_fails_cleanly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bridge_store", "bridge", "--store-url", STORE_URL],
        env=without_store_token(),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert result.returncode == 2
    assert "no store token" in result.stderr
    assert "Traceback" not in result.stderr


# -- the sidecar ----------------------------------------------------------------------


def test_sidecar_serves_callstore_with_its_token() -> None:
    with start_sidecar("memory://") as sidecar:
        request = {"substore": "agents", "method": "get", "input": {"agentId": "agent-1"}}
        with httpx.Client(base_url=sidecar.url, timeout=WAIT_SECONDS) as http:
            path = "sdk.v1.SdkStoreCallbackService/CallStore"
            headers = {"Connect-Protocol-Version": "1"}
            allowed = http.post(
                path,
                json=request,
                headers={**headers, "Authorization": f"Bearer {sidecar.auth_token}"},
            )
            refused = http.post(path, json=request, headers=headers)
        assert (allowed.status_code, allowed.json()) == (200, {})
        assert refused.status_code == 401
        # The token reached the server through its environment, not its command line.
        assert isinstance(sidecar.process.args, list)
        assert sidecar.auth_token not in sidecar.process.args
    assert sidecar.process.returncode == 0


def test_sidecar_that_cannot_start_reports_why() -> None:
    with pytest.raises(ConfigurationError, match="no installed backend serves nosuch://"):
        start_sidecar("nosuch://x")


# -- the real bridge ------------------------------------------------------------------


@pytest.fixture
def cursor_api() -> Iterator[CursorApiStub]:
    with CursorApiStub() as stub:
        yield stub


@pytest.mark.bridge
def test_sync_and_async_sdk_clients_reach_the_store_through_the_real_bridge(
    tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(tmp_path)}
    with (
        start_sidecar("memory://") as sidecar,
        launch_bridge(sidecar.url, sidecar.auth_token, workspace=project, env=env) as bridge,
    ):
        with bridge.client() as client:
            agent = client.agents.create(
                model=MODEL_ID, api_key="key", name="sync", local=local_options(project)
            )

        async def list_names() -> list[str]:
            async with bridge.async_client() as client:
                page = await client.agents.list()
                return [item.name for item in page.items]

        assert asyncio.run(list_names()) == ["sync"]
        assert "/auth/exchange_user_api_key" in cursor_api.paths()
    assert agent.agent_id.startswith("agent-")
    assert bridge.process.returncode is not None


@pytest.mark.bridge
def test_bridge_command_runs_the_real_bridge_against_a_running_store(
    tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {**without_store_token(), "CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(tmp_path)}
    with start_sidecar("memory://") as sidecar:
        token_file = tmp_path / "store.token"
        token_file.write_text(sidecar.auth_token + "\n")
        args = ["--store-url", sidecar.url, "--auth-token-file", str(token_file)]
        with bridge_command(*args, "--workspace", str(project), env=env) as (process, ready):
            # What a launcher reading the ready line does with it.
            endpoint = cursor_sdk.BridgeEndpoint.from_discovery(ready)
            with cursor_sdk.Client(endpoint, allow_api_key_env_fallback=True) as client:
                agent = client.agents.create(
                    model=MODEL_ID, api_key="key", name="via cli", local=local_options(project)
                )
            process.send_signal(signal.SIGTERM)
            assert process.wait(WAIT_SECONDS) == 0
        with httpx.Client(base_url=sidecar.url, timeout=WAIT_SECONDS) as http:
            stored = http.post(
                "sdk.v1.SdkStoreCallbackService/CallStore",
                json={"substore": "agents", "method": "get", "input": {"agentId": agent.agent_id}},
                headers={
                    "Connect-Protocol-Version": "1",
                    "Authorization": f"Bearer {sidecar.auth_token}",
                },
            )
        assert stored.json()["output"]["name"] == "via cli"
    # The bridge's own token file went with it.
    assert not Path(ready["authTokenFile"]).exists()
