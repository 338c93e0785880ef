"""The bundled client: the bridge, its store, launch() and the bridge-store bridge command.

Most tests run a fake bridge shaped like the real launcher (a shell script that runs
the actual program as its child) so they can check the command line, environment and
shutdown the client gives it; the last ones drive the real bridge. Whether a process
is left behind is checked by pid.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cursor_sdk
import httpx
import pytest

from bridge_store.cli.bridge import bridge_main
from bridge_store.client import (
    BRIDGE_READY_PREFIX,
    INSTALL_HINT,
    Session,
    SessionError,
    Sidecar,
    bridge_argv,
    bridge_path,
    check_store,
    launch,
    launch_bridge,
    local_options,
    start_sidecar,
)
from bridge_store.client._process import StderrPump
from bridge_store.errors import ConfigurationError
from bridge_store.security.auth import Scope
from bridge_store.security.tokens import TOKEN_ENV, load_or_generate, read_auth_token
from bridge_store.security.tokens_file import add_token
from bridge_store.server.config import READY_PREFIX
from testkit.cursor_api import MODEL_ID, REFUSAL_MESSAGE, RUN_PATH, CursorApiStub
from tests.support.fake_bridge import (
    WAIT_SECONDS,
    BridgeCommand,
    FakeBridge,
    bridge_command,
    fake_command_env,
    run_bridge_command,
    without_store_token,
)
from tests.support.processes import descendants, running, still_running
from tests.support.server import StoreHttpClient

STORE_URL = "http://127.0.0.1:9/"
STORE_TOKEN = "store-token"

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


def test_extra_bridge_args_come_last_and_cannot_replace_the_store_flags() -> None:
    argv = bridge_argv(STORE_URL, STORE_TOKEN, command=["bridge"], extra_args=["--x", "1"])
    assert argv[-2:] == ["--x", "1"]
    for flag in ("--store-callback-url", "--local-store=", "--store-callback-auth-token"):
        with pytest.raises(ConfigurationError, match="sets the bridge's --"):
            bridge_argv(STORE_URL, STORE_TOKEN, command=["bridge"], extra_args=[flag, "v"])


def test_the_sdk_variable_for_another_launcher_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CURSOR_SDK_BRIDGE_BIN", "/opt/bridge/cursor-sdk-bridge")
    assert bridge_path() == "/opt/bridge/cursor-sdk-bridge"


def test_bridge_path_is_the_launcher_in_the_installed_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CURSOR_SDK_BRIDGE_BIN", raising=False)
    path = Path(bridge_path())
    assert path.name == "cursor-sdk-bridge"
    assert os.access(path, os.X_OK)


def test_without_cursor_sdk_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cursor_sdk", None)
    monkeypatch.delenv("CURSOR_SDK_BRIDGE_BIN", raising=False)
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
    # Store URLs carry database passwords: no store setting reaches the bridge.
    monkeypatch.setenv("BRIDGE_STORE_URL", "postgresql://u:secret@db/x")
    env = {**fake_bridge.env(), "CURSOR_SDK_STORE_CALLBACK_TOKEN": "given", "EXTRA": "kept"}
    env["BRIDGE_STORE_CHECKPOINTS_URL"] = "s3://b/p?secret_access_key=SK"
    with launch_bridge(STORE_URL, STORE_TOKEN, command=fake_bridge.command, env=env):
        bridge_env = fake_bridge.started()["env"]
    assert bridge_env["EXTRA"] == "kept"
    assert not {
        "BRIDGE_STORE_AUTH_TOKEN",
        "BRIDGE_STORE_URL",
        "BRIDGE_STORE_CHECKPOINTS_URL",
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


def test_a_bridge_that_never_gets_ready_is_stopped(
    fake_bridge: FakeBridge, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 0.5 s for a ready line start counting only once the fake handles SIGTERM:
    # on a loaded machine the interpreter can take longer than that to get there, and
    # a SIGTERM before its handler would kill it without a record of being stopped.
    wait_ready = StderrPump.wait_ready

    def wait_ready_once_handling(pump: StderrPump, timeout: float) -> str | None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not fake_bridge.handling_signals():
            assert time.monotonic() < deadline, "the fake bridge never started"
            time.sleep(0.01)
        return wait_ready(pump, timeout)

    monkeypatch.setattr(StderrPump, "wait_ready", wait_ready_once_handling)
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


# -- checking the store before the bridge starts --------------------------------------


@pytest.fixture(scope="module")
def memory_store() -> Iterator[Sidecar]:
    with start_sidecar("memory://") as sidecar:
        yield sidecar


@contextmanager
def closed_port() -> Iterator[str]:
    """A loopback URL where nothing accepts connections (the port stays bound, unused)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{unused.getsockname()[1]}/"


def test_store_check_passes_for_a_store_that_takes_the_token(memory_store: Sidecar) -> None:
    check_store(memory_store.url, memory_store.auth_token)


def test_store_check_says_the_token_was_rejected(memory_store: Sidecar) -> None:
    with pytest.raises(ConfigurationError, match="rejected the auth token"):
        check_store(memory_store.url, "not-the-token")


def test_store_check_names_an_unreachable_store() -> None:
    with closed_port() as url, pytest.raises(ConfigurationError) as raised:
        check_store(url, STORE_TOKEN)
    assert str(raised.value).startswith(f"cannot reach the store at {url}: ")


def test_store_check_tells_other_servers_apart() -> None:
    with CursorApiStub() as other, pytest.raises(ConfigurationError, match="with HTTP 404"):
        check_store(other.url, STORE_TOKEN)
    with pytest.raises(ConfigurationError, match="must start with http"):
        check_store("file:///etc/passwd", STORE_TOKEN)


def test_store_check_says_a_plain_http_server_was_given_https(memory_store: Sidecar) -> None:
    # It said "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)".
    secure = memory_store.url.replace("http://", "https://", 1)
    with pytest.raises(ConfigurationError) as raised:
        check_store(secure, memory_store.auth_token)
    assert str(raised.value) == (
        f"the server at {secure} speaks plain HTTP, not HTTPS: give {memory_store.url}"
    )


def test_store_check_takes_the_viewer_s_address_for_the_server_s(memory_store: Sidecar) -> None:
    check_store(memory_store.url + "ui/", memory_store.auth_token)
    check_store(memory_store.url + "ui", memory_store.auth_token)


# -- launch: the store and the bridge together ----------------------------------------


def fake_launch(fake: FakeBridge, mode: str = "ready", **options: Any) -> Session:
    # A directory that is no git checkout: the suite's own checkout (a CI clone has an
    # origin) would give the bridge a workspace URL, which these tests do not look at.
    options.setdefault("workspace", fake.directory)
    return launch(
        command_store(options), bridge_command=fake.command, env=fake.env(mode), **options
    )


def command_store(options: dict[str, Any]) -> str | None:
    """memory:// unless the test gives an existing store."""
    return None if "store_url" in options else "memory://"


def assert_all_stopped(pids: list[int]) -> None:
    assert pids
    assert still_running(pids) == []


def test_launch_starts_a_store_and_the_bridge_on_it(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    with fake_launch(fake_bridge, workspace=tmp_path, bridge_args=["--x", "1"]) as session:
        pids = session.pids
        assert session.sidecar is not None
        sidecar_pid = session.sidecar.process.pid
        assert pids == [sidecar_pid, session.bridge.process.pid, session.bridge.ready["pid"]]
        assert all(running(pid) for pid in pids)
        argv = fake_bridge.started()["argv"]
        assert argv[:4] == [
            "--store-callback-url", session.store_url,
            "--store-callback-auth-token", session.store_auth_token,
        ]  # fmt: skip
        assert argv[-2:] == ["--x", "1"]
        # The bridge was pointed at a live store that takes the token.
        store = StoreHttpClient(session.store_url, session.store_auth_token)
        assert store.call("agents", "get", {"agentId": "a"}) is None
        store.close()
        assert session.local == {"cwd": str(tmp_path), "store": {"type": "custom"}}
        assert session.agent_options(model=MODEL_ID, api_key="k") == {
            "model": MODEL_ID,
            "api_key": "k",
            "local": {"cwd": str(tmp_path), "store": {"type": "custom"}},
        }
        # A caller's own local options keep the custom store.
        options = session.agent_options(local={"cwd": "/elsewhere", "store": {"type": "sqlite"}})
        assert options["local"] == {"cwd": "/elsewhere", "store": {"type": "custom"}}
        assert isinstance(session.client, cursor_sdk.Client)
        assert session.client is session.client
    assert fake_bridge.stopped()
    assert_all_stopped(pids)
    assert session.failure is None


def test_launch_stops_everything_when_the_caller_raises(fake_bridge: FakeBridge) -> None:
    pids: list[int] = []

    def caller() -> None:
        with fake_launch(fake_bridge) as session:
            pids.extend(session.pids)
            raise KeyError("the caller's own failure")

    with pytest.raises(KeyError) as raised:
        caller()
    assert not getattr(raised.value, "__notes__", [])
    assert fake_bridge.stopped()
    assert_all_stopped(pids)


def test_launch_uses_an_existing_store_after_checking_it(
    fake_bridge: FakeBridge, memory_store: Sidecar
) -> None:
    with fake_launch(
        fake_bridge, store_url=memory_store.url, auth_token=memory_store.auth_token
    ) as session:
        assert session.sidecar is None
        assert session.pids == [session.bridge.process.pid, session.bridge.ready["pid"]]
        assert fake_bridge.started()["argv"][1] == memory_store.url
    # The store belongs to someone else: it keeps running.
    assert memory_store.process.poll() is None
    # Given the viewer's address, the bridge is pointed at the server's.
    with fake_launch(
        fake_bridge, store_url=memory_store.url + "ui/", auth_token=memory_store.auth_token
    ):
        assert fake_bridge.started()["argv"][1] == memory_store.url


def test_launch_refuses_a_wrong_token_before_starting_the_bridge(
    fake_bridge: FakeBridge, memory_store: Sidecar
) -> None:
    with pytest.raises(ConfigurationError, match="rejected the auth token"):
        fake_launch(fake_bridge, store_url=memory_store.url, auth_token="wrong")
    assert not (fake_bridge.directory / "started.json").exists()
    with pytest.raises(ConfigurationError, match="needs its auth_token"):
        fake_launch(fake_bridge, store_url=memory_store.url)


def test_launch_stops_its_store_when_the_bridge_cannot_start(
    fake_bridge: FakeBridge,
) -> None:
    before = descendants(os.getpid())
    with pytest.raises(ConfigurationError, match="exited with status 3") as raised:
        fake_launch(fake_bridge, "crash")
    assert "boom" in str(raised.value)
    assert descendants(os.getpid()) <= before


@pytest.mark.parametrize("victim", ["bridge", "store"])
def test_a_child_that_dies_makes_the_exit_fail_and_nothing_is_left(
    fake_bridge: FakeBridge, victim: str
) -> None:
    pids: list[int] = []

    def kill_one() -> int:
        with fake_launch(fake_bridge) as session:
            pids.extend(session.pids)
            assert session.sidecar is not None
            sidecar_pid = session.sidecar.process.pid
            pid = int(session.bridge.ready["pid"] if victim == "bridge" else sidecar_pid)
            os.kill(pid, signal.SIGKILL)
            assert session.wait(WAIT_SECONDS)
        return pid

    with pytest.raises(SessionError) as raised:
        kill_one()
    what = "cursor-sdk-bridge" if victim == "bridge" else "the store server"
    killed = pids[2] if victim == "bridge" else pids[0]
    message = str(raised.value)
    assert message.startswith(f"{what} (pid {killed}) ")
    # The launcher reports its child's death the shell's way.
    assert ("exited with status 137" if victim == "bridge" else "was killed by SIGKILL") in message
    assert_all_stopped(pids)


def test_a_dead_child_is_noted_on_the_callers_own_exception(fake_bridge: FakeBridge) -> None:
    failures: list[str | None] = []

    def caller() -> None:
        with fake_launch(fake_bridge) as session:
            assert session.sidecar is not None
            os.kill(session.sidecar.process.pid, signal.SIGKILL)
            assert session.wait(WAIT_SECONDS)
            with pytest.raises(SessionError, match="the store server"):
                session.check()
            failures.append(session.failure)
            raise ValueError("the caller's code failed")

    with pytest.raises(ValueError, match="caller") as raised:
        caller()
    assert raised.value.__notes__ == [f"bridge-store: {failures[0]}"]


# -- the bridge command ---------------------------------------------------------------


def test_auth_token_comes_from_the_environment_first(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    assert read_auth_token(token_file, {"BRIDGE_STORE_AUTH_TOKEN": "from-env"}) == "from-env"
    assert read_auth_token(token_file, {}) == "from-file"


def test_generated_tokens_never_start_with_a_dash(memory_store: Sidecar, tmp_path: Path) -> None:
    # The bridge of cursor-sdk 0.1.9 reads "--store-callback-auth-token -..." as a flag
    # with no value; base64url tokens start with "-" once in 64.
    generated = load_or_generate(str(tmp_path / "token"), {}).value
    named = add_token(tmp_path / "tokens.toml", "bridge", tenant="team", scope=Scope.WRITE)
    for token in (memory_store.auth_token, generated, named):
        assert re.fullmatch(r"[0-9a-f]{64}", token), token


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


def test_bridge_main_needs_a_token_for_an_existing_store() -> None:
    with pytest.raises(ConfigurationError, match="no store token"):
        bridge_main(store_callback_url=STORE_URL, environ={})
    with pytest.raises(ConfigurationError, match="goes with --store-callback-url"):
        bridge_main(store_auth_token_file="token", environ={})


def test_bridge_command_prints_discovery_and_stops_both_on_sigterm(
    fake_bridge: FakeBridge,
) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher), "--", "--x", "1"]
    with bridge_command(*args, env=fake_command_env(fake_bridge)) as command:
        assert command.discovery["url"] == "http://127.0.0.1:9"
        children = command.children()
        assert {command.store_pid(), command.discovery["pid"]} < children
        command.process.send_signal(signal.SIGTERM)
        assert command.process.wait(WAIT_SECONDS) == 0
    assert fake_bridge.stopped()
    assert_all_stopped(sorted(children))
    assert fake_bridge.started()["argv"][-2:] == ["--x", "1"]
    # Both children's stderr passed through, ready lines included.
    assert any(line.startswith(READY_PREFIX) for line in command.stderr)
    assert any(line.startswith(BRIDGE_READY_PREFIX) for line in command.stderr)


def test_bridge_command_exits_with_the_bridge_and_stops_the_store(
    fake_bridge: FakeBridge,
) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    with bridge_command(*args, env=fake_command_env(fake_bridge)) as command:
        store_pid = command.store_pid()
        bridge_pid = command.discovery["pid"]
        os.kill(bridge_pid, signal.SIGUSR1)
        assert command.process.wait(WAIT_SECONDS) == 5
    assert_all_stopped([store_pid])
    assert f"bridge-store: cursor-sdk-bridge (pid {bridge_pid}) exited with status 5" in "".join(
        command.stderr
    )


def test_bridge_command_stops_the_bridge_when_the_store_dies(fake_bridge: FakeBridge) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    with bridge_command(*args, env=fake_command_env(fake_bridge)) as command:
        store_pid = command.store_pid()
        children = command.children()
        os.kill(store_pid, signal.SIGKILL)
        assert command.process.wait(WAIT_SECONDS) == 1
    assert fake_bridge.stopped()
    assert_all_stopped(sorted(children))
    assert f"bridge-store: the store server (pid {store_pid}) was killed by SIGKILL" in "".join(
        command.stderr
    )


def test_bridge_command_uses_an_existing_store_with_its_token_file(
    fake_bridge: FakeBridge, memory_store: Sidecar, tmp_path: Path
) -> None:
    token_file = tmp_path / "store.token"
    token_file.write_text(memory_store.auth_token + "\n")
    args = ["--store-callback-url", memory_store.url, "--store-auth-token-file", str(token_file)]
    env = fake_command_env(fake_bridge, CURSOR_SDK_BRIDGE_BIN=str(fake_bridge.launcher))
    with bridge_command(*args, env=env) as command:
        # Only the bridge: the store is someone else's.
        assert not any(
            b"\0serve\0" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in command.children()
        )
        command.process.send_signal(signal.SIGINT)
        assert command.process.wait(WAIT_SECONDS) == 0
    started = fake_bridge.started()
    assert started["argv"][:4] == [
        "--store-callback-url", memory_store.url,
        "--store-callback-auth-token", memory_store.auth_token,
    ]  # fmt: skip
    assert TOKEN_ENV not in started["env"]


def test_bridge_command_failures_are_one_line_and_exit_2(
    fake_bridge: FakeBridge, memory_store: Sidecar, tmp_path: Path
) -> None:
    env = fake_command_env(fake_bridge, CURSOR_SDK_BRIDGE_BIN=str(fake_bridge.launcher))
    wrong = tmp_path / "wrong.token"
    wrong.write_text("wrong\n")
    with closed_port() as unreachable:
        cases = {
            "no store token": ["--store-callback-url", memory_store.url],
            "rejected the auth token": [
                "--store-callback-url", memory_store.url, "--store-auth-token-file", str(wrong),
            ],
            f"cannot reach the store at {unreachable}": [
                "--store-callback-url", unreachable, "--store-auth-token-file", str(wrong),
            ],
            "configure an embedded store": [
                "--store", "memory://", "--store-callback-url", memory_store.url,
            ],
        }  # fmt: skip
        for message, args in cases.items():
            result = run_bridge_command(*args, env=env)
            assert (result.returncode, result.stdout) == (2, ""), message
            assert result.stderr.startswith("bridge-store: "), result.stderr
            assert message in result.stderr
            assert "Traceback" not in result.stderr
    # None of these got as far as starting the bridge.
    assert not (fake_bridge.directory / "started.json").exists()


def test_bridge_command_shows_the_output_of_a_bridge_that_cannot_start(
    fake_bridge: FakeBridge,
) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    result = run_bridge_command(*args, env=fake_command_env(fake_bridge, "crash"))
    assert result.returncode == 2
    assert "bridge-store: cursor-sdk-bridge exited with status 3 before it was ready\n" in (
        result.stderr
    )
    # Its last words passed through as it wrote them, once: not repeated in the error,
    # and without the stack frames under them.
    assert result.stderr.count("boom") == 1
    assert " at " not in result.stderr


def test_bridge_command_refuses_an_address_the_bridge_cannot_take_in_one_line(
    fake_bridge: FakeBridge,
) -> None:
    # The real bridge answered these with its error and 5 to 9 lines of Node stack
    # trace, then bridge-store's summary.
    env = fake_command_env(fake_bridge)
    embedded = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = f"cannot listen on 127.0.0.1:{port} (Address already in use): another process"
        cases = {
            "--host 0.0.0.0: the bridge listens on loopback only (127.0.0.1, ::1 or "
            "localhost); its clients run on this machine": ["--host", "0.0.0.0"],
            f"{taken} holds the port; stop it or choose another --port": ["--port", str(port)],
            f"{taken} holds the port; stop it or choose another --store-port": [
                "--store-port", str(port),
            ],
        }  # fmt: skip
        for message, args in cases.items():
            result = run_bridge_command(*embedded, *args, env=env)
            assert (result.returncode, result.stdout) == (2, ""), message
            assert result.stderr == f"bridge-store: {message}\n"
    assert not (fake_bridge.directory / "started.json").exists()


def stderr_line(command: BridgeCommand, start: str) -> str:
    """The first line of the command's stderr that starts with ``start``, once written."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = [line for line in list(command.stderr) if line.startswith(start)]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no line starting {start!r}:\n{''.join(command.stderr)}")


def test_bridge_command_pins_the_embedded_store_s_port(fake_bridge: FakeBridge) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = ["--store", "memory://", "--store-port", str(port)]
    with bridge_command(
        *args, "--bridge-bin", str(fake_bridge.launcher), env=fake_command_env(fake_bridge)
    ) as command:
        ready = json.loads(stderr_line(command, READY_PREFIX).removeprefix(READY_PREFIX))
        assert ready["url"] == f"http://127.0.0.1:{port}/"
        assert fake_bridge.started()["argv"][1] == f"http://127.0.0.1:{port}/"
    result = run_bridge_command(
        "--store-callback-url",
        STORE_URL,
        "--store-port",
        str(port),
        env=fake_command_env(fake_bridge),
    )
    assert result.returncode == 2
    assert "--store-port and the substore flags configure an embedded store" in result.stderr


def test_bridge_command_says_in_one_line_when_the_cursor_api_cannot_be_reached(
    fake_bridge: FakeBridge,
) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    with closed_port() as unreachable:
        api = unreachable.rstrip("/")
        env = fake_command_env(fake_bridge, CURSOR_BACKEND_URL=api)
        with bridge_command(*args, env=env) as command:
            line = stderr_line(command, "bridge-store: cannot reach the Cursor API")
    assert line == (
        f"bridge-store: cannot reach the Cursor API at {api} (Connection refused): agents "
        "and runs need a Cursor API key (CURSOR_API_KEY) and the Cursor API; without them, "
        "bridge-store bridge --offline keeps agents in the store and ends every run at once "
        "with an error saying no model runs offline\n"
    )
    # An API that answers: nothing said.
    with CursorApiStub() as api_up:
        env = fake_command_env(fake_bridge, CURSOR_BACKEND_URL=api_up.url)
        with bridge_command(*args, env=env) as command:
            stderr_line(command, "bridge-store: history viewer at ")
            time.sleep(1.0)
            assert not [line for line in command.stderr if "Cursor API" in line]


def test_bridge_command_offline_points_the_bridge_at_the_stand_in(
    fake_bridge: FakeBridge,
) -> None:
    args = ["--store", "memory://", "--offline", "--bridge-bin", str(fake_bridge.launcher)]
    # The variable the user has set is not the one the bridge gets offline.
    env = fake_command_env(fake_bridge, CURSOR_BACKEND_URL="https://api.example")
    with bridge_command(*args, env=env) as command:
        line = stderr_line(command, "bridge-store: offline: ")
        given = fake_bridge.started()["env"]["CURSOR_BACKEND_URL"]
        assert given.startswith("http://127.0.0.1:")
        models = httpx.get(f"{given}/v1/models", timeout=WAIT_SECONDS).json()
        assert models["items"][0]["id"] == "composer-2"
    assert "no model runs offline" in line
    assert not [line for line in command.stderr if "cannot reach the Cursor API" in line]
    # Stopped with the bridge.
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{given}/v1/models", timeout=5)


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


@pytest.mark.bridge
def test_launch_runs_an_agent_on_the_store_through_the_real_bridge(
    tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(tmp_path)}
    store_file = tmp_path / "agents.db"
    with launch(f"sqlite:///{store_file}", workspace=project, env=env) as session:
        pids = session.pids
        agent = session.client.agents.create(
            session.agent_options(model=MODEL_ID, api_key="key", name="sync")
        )
        result = agent.send("hello").wait()

        async def list_names() -> list[str]:
            async with session.async_client() as client:
                page = await client.agents.list()
                return [item.name for item in page.items]

        assert asyncio.run(list_names()) == ["sync"]
        store = StoreHttpClient(session.store_url, session.store_auth_token)
        stored = store.call("agents", "get", {"agentId": agent.agent_id})
        assert (stored["name"], stored["cwd"]) == ("sync", str(project))
        runs = store.list_all("runs", {"agentIds": [agent.agent_id]})
        assert [run["runId"] for run in runs] == [result.id]
        assert [event["seq"] for event in store.events(result.id)][:1] == [1]
        store.close()
        assert "/auth/exchange_user_api_key" in cursor_api.paths()
    assert result.status == "error"  # the stand-in runs no model
    assert_all_stopped(pids)
    assert store_file.exists()


@pytest.mark.bridge
def test_bridge_command_runs_the_real_bridge_on_an_embedded_store(
    tmp_path: Path, cursor_api: CursorApiStub
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = {**without_store_token(), "CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(tmp_path)}
    env.pop("CURSOR_SDK_BRIDGE_BIN", None)
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    args = ["--store", store, "--workspace", str(project)]
    with bridge_command(*args, env=env) as command:
        children = command.children()
        # What a Connect client does with the discovery JSON.
        endpoint = cursor_sdk.BridgeEndpoint.from_discovery(command.discovery)
        with cursor_sdk.Client(endpoint, allow_api_key_env_fallback=True) as client:
            agent = client.agents.create(
                model=MODEL_ID, api_key="key", name="via cli", local=local_options(project)
            )
        command.process.send_signal(signal.SIGTERM)
        assert command.process.wait(WAIT_SECONDS) == 0
    assert_all_stopped(sorted(children))
    # The bridge's own token file went with it.
    assert not Path(command.discovery["authTokenFile"]).exists()
    with start_sidecar(store) as again:
        stored = StoreHttpClient(again.url, again.auth_token)
        assert stored.call("agents", "get", {"agentId": agent.agent_id})["name"] == "via cli"
        stored.close()


@pytest.mark.bridge
def test_the_offline_bridge_runs_an_agent_with_no_key_and_no_network(tmp_path: Path) -> None:
    # No key, no Cursor API: `bridge --offline` brings its own stand-in, whose refusal
    # says why the run ended, in the run's own error.
    project = tmp_path / "project"
    project.mkdir()
    env = {**without_store_token(), "HOME": str(tmp_path)}
    for name in ("CURSOR_SDK_BRIDGE_BIN", "CURSOR_BACKEND_URL", "CURSOR_API_KEY"):
        env.pop(name, None)
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    args = ["--offline", "--store", store, "--workspace", str(project)]
    with bridge_command(*args, env=env) as command:
        endpoint = cursor_sdk.BridgeEndpoint.from_discovery(command.discovery)
        with cursor_sdk.Client(endpoint, allow_api_key_env_fallback=True) as client:
            agent = client.agents.create(
                model=MODEL_ID, api_key="any", name="offline", local=local_options(project)
            )
            result = agent.send("hello").wait()
        command.process.send_signal(signal.SIGTERM)
        assert command.process.wait(WAIT_SECONDS) == 0
    assert result.status == "error"
    assert result.error_message == f"[unauthenticated] {REFUSAL_MESSAGE}"
    with start_sidecar(store) as again:
        stored = StoreHttpClient(again.url, again.auth_token)
        (run,) = stored.list_all("runs", {"agentIds": [agent.agent_id]})
        assert (run["status"], run["error"]) == ("error", f"[unauthenticated] {REFUSAL_MESSAGE}")
        stored.close()


@pytest.mark.bridge
def test_launch_offline_gives_agents_a_key_the_stand_in_takes(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with launch(
        f"sqlite:///{tmp_path / 'agents.db'}",
        workspace=project,
        offline=True,
        env={"HOME": str(tmp_path)},
    ) as session:
        assert session.offline_api is not None
        agent = session.client.agents.create(session.agent_options(model=MODEL_ID, name="py"))
        result = agent.send("hello").wait()
        assert result.status == "error"
        assert REFUSAL_MESSAGE in (result.error_message or "")
        assert RUN_PATH in session.offline_api.paths()
        api_url = session.offline_api.url
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{api_url}/v1/models", timeout=5)
