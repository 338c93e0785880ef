"""The bridge-store command line, run as real subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.cli import build_parser
from bridge_store.cli.shared.store_options import STORE_FLAG_ENV, routes_from
from bridge_store.server.config import READY_PREFIX
from bridge_store.stack.stores import Routes
from bridge_store.urls import redact

from .support.server import CALL_STORE_PATH, serve, start_server

ROOT = Path(__file__).resolve().parent.parent


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def test_help_names_every_command_and_option() -> None:
    top = run_cli("--help")
    assert top.returncode == 0
    assert "serve" in top.stdout
    assert "db" in top.stdout
    serve_help = run_cli("serve", "--help").stdout
    for option in (
        "--host",
        "--port",
        "--store",
        "--agents",
        "--runs",
        "--run-events",
        "--checkpoints",
        "--auth-token-file",
        "--max-request-bytes",
        "--no-migrate",
        "BRIDGE_STORE_AUTH_TOKEN",
        *STORE_FLAG_ENV.values(),
    ):
        assert option in serve_help, option
    assert "upgrade" in run_cli("db", "--help").stdout
    bridge_help = run_cli("bridge", "--help").stdout
    for option in (
        "--store",
        "--checkpoints",
        "--store-callback-url",
        "--store-auth-token-file",
        "--bridge-bin",
        "CURSOR_SDK_BRIDGE_BIN",
        "-- BRIDGE_ARG",
        *STORE_FLAG_ENV.values(),
    ):
        assert option in bridge_help, option


#: What only the commands that use it may load: building the parser (``--help``, a
#: mistyped flag, and every command before it runs) must not.
COMMAND_ONLY_MODULES = (
    "bridge_store.server.app",
    "bridge_store.server.serving",
    "bridge_store.rpc.connect",
    "bridge_store.viewer.reader",
    "bridge_store.viewer.terminal",
    "bridge_store.lifecycle.copy",
    "bridge_store.lifecycle.progress",
    "bridge_store.demo.history",
    "rich",
    "jinja2",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "opentelemetry",
    "redis",
    "obstore",
)


def test_building_the_parser_loads_no_command_s_work() -> None:
    code = (
        "import sys; from bridge_store.cli import build_parser; build_parser(); print(*sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(found.stdout.split())
    assert "bridge_store.cli.agents" in loaded
    assert loaded.isdisjoint(COMMAND_ONLY_MODULES), loaded & set(COMMAND_ONLY_MODULES)


def test_serve_defaults() -> None:
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.migrate) == ("127.0.0.1", 8787, True)
    assert routes_from(args, {}) == Routes(*["sqlite:///bridge-store.db"] * 4)
    assert args.max_request_bytes >= 64 * 1024 * 1024


def test_store_urls_come_from_flags_then_environment() -> None:
    environ = {
        "BRIDGE_STORE_URL": "postgresql://db/x",
        "BRIDGE_STORE_RUN_EVENTS_URL": "redis://cache/0",
        "BRIDGE_STORE_CHECKPOINTS_URL": "s3://bucket/p",
    }
    args = build_parser().parse_args(["serve", "--checkpoints", "memory://"])
    assert routes_from(args, environ) == Routes(
        agents="postgresql://db/x",
        runs="postgresql://db/x",
        run_events="redis://cache/0",
        checkpoints="memory://",
    )
    # The embedded store of the bridge command is configured the same way.
    bridge = build_parser().parse_args(["bridge", "--store", "memory://"])
    assert routes_from(bridge, environ).agents == "memory://"


def test_bridge_command_arguments() -> None:
    parser = build_parser()
    args = parser.parse_args(["bridge", "--", "--max-concurrent-agents", "4"])
    assert args.bridge_args == ["--max-concurrent-agents", "4"]
    assert (args.store, args.store_callback_url) == (None, None)
    existing = parser.parse_args(
        ["bridge", "--store-callback-url", "http://s/", "--store-auth-token-file", "f"]
    )
    assert (existing.store_callback_url, existing.store_auth_token_file) == ("http://s/", "f")


@dataclass
class OwnTokenServer:
    ready_line: str = ""
    ready: dict[str, Any] = field(default_factory=dict)
    stderr_after_ready: str = ""
    returncode: int | None = None


#: A token serve accepts (16 characters or more), for tests about other things.
LONG_ENOUGH = {"BRIDGE_STORE_AUTH_TOKEN": "a-token-of-24-characters"}


@contextmanager
def serve_with_own_token(*args: str, cwd: Path | None = None) -> Iterator[OwnTokenServer]:
    """``serve`` with neither token nor store in the environment: the CLI's own handling."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("BRIDGE_STORE_AUTH_TOKEN", "BRIDGE_STORE_URL")
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    server = OwnTokenServer()
    try:
        assert process.stderr is not None
        server.ready_line = next(line for line in process.stderr if line.startswith(READY_PREFIX))
        server.ready = json.loads(server.ready_line.removeprefix(READY_PREFIX))
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        server.stderr_after_ready = process.communicate(timeout=30)[1]
        server.returncode = process.returncode


def list_agents(url: str, token: str) -> httpx.Response:
    return httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": "agents", "method": "list", "input": {}},
        headers={"Authorization": f"Bearer {token}"},
    )


def test_serve_on_default_store_generates_a_private_token_file(tmp_path: Path) -> None:
    with serve_with_own_token(cwd=tmp_path) as server:
        token_file = Path(server.ready["authTokenFile"])
        assert token_file == tmp_path / "bridge-store.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token not in server.ready_line
        assert server.ready["url"].startswith("http://127.0.0.1:")
        assert list_agents(server.ready["url"], token).json() == {"output": {"items": []}}
        assert (tmp_path / "bridge-store.db").exists()
    assert server.returncode == 0, server.stderr_after_ready
    assert token not in server.stderr_after_ready


def test_the_version_is_pyprojects_and_serve_announces_it(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run_cli("--version").stdout.strip() == declared
    with serve_with_own_token("--store", "memory://", cwd=tmp_path) as server:
        assert server.ready["version"] == declared
    # The README's example ready line shows it too, and the changelog has its section
    # below the one the next changes go to.
    assert f'"version": "{declared}"' in (ROOT / "README.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[:2] == ["Unreleased", declared]


def test_token_from_file_is_used_and_not_announced(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-of-20-chars\n")
    token_file.chmod(0o600)
    with serve_with_own_token(
        "--store", "memory://", "--auth-token-file", str(token_file)
    ) as server:
        assert "authTokenFile" not in server.ready
        assert list_agents(server.ready["url"], "file-token-of-20-chars").status_code == 200
        assert list_agents(server.ready["url"], "other-token").status_code == 401


def test_missing_token_file_is_generated_there(tmp_path: Path) -> None:
    token_file = tmp_path / "secrets" / "store.token"
    with serve_with_own_token(
        "--store", "memory://", "--auth-token-file", str(token_file)
    ) as server:
        assert server.ready["authTokenFile"] == str(token_file)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert list_agents(server.ready["url"], token).status_code == 200


def test_sigterm_lets_in_flight_requests_finish(tmp_path: Path) -> None:
    server = start_server("--store", f"sqlite:///{tmp_path / 'store.db'}")
    blob = "A" * (8 * 1024 * 1024)
    body = json.dumps(
        {
            "substore": "checkpoints",
            "method": "create",
            "input": {"agentId": "a", "blobId": "b", "data": blob},
        }
    ).encode()
    host, port = server.url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(
            (
                f"POST /{CALL_STORE_PATH} HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
            ).encode()
        )
        # The server answers 100 Continue once the app asks for the body: the request
        # is being handled, and cannot be answered before the body is sent.
        assert read_head(connection).startswith(b"HTTP/1.1 100 ")
        connection.sendall(body[: len(body) // 2])
        server.process.send_signal(signal.SIGTERM)
        # The server is shutting down (it stopped listening) with the request half in.
        deadline = time.monotonic() + 60
        while accepts_connections(host, int(port)):
            assert time.monotonic() < deadline, "the server never began shutting down"
            time.sleep(0.05)
        assert server.process.poll() is None
        connection.sendall(body[len(body) // 2 :])
        head = read_head(connection)
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        answer = b""
        while len(answer) < length:
            chunk = connection.recv(length - len(answer))
            assert chunk, "the connection closed mid-answer"
            answer += chunk
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert json.loads(answer) == {}  # checkpoints.create answers null
    assert server.stop() == 0
    with serve("--store", f"sqlite:///{tmp_path / 'store.db'}") as again:
        stored = again.call("checkpoints", "get", {"agentId": "a", "blobId": "b"})
    assert stored == {"found": True, "data": blob}


def test_a_stop_signal_repeated_while_serve_exits_does_not_kill_it(tmp_path: Path) -> None:
    # A supervisor may send SIGTERM again while the server is finishing; the process
    # used to die of it (-15) once Python had put the default handlers back.
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "serve", "--port", "0", "--store", "memory://"],
        cwd=tmp_path,
        env={**os.environ, **LONG_ENOUGH},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    next(line for line in process.stderr if line.startswith(READY_PREFIX))
    deadline = time.monotonic() + 60
    while process.poll() is None:
        assert time.monotonic() < deadline, "serve did not stop"
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    process.stderr.close()
    assert process.returncode == 0


def read_head(connection: socket.socket) -> bytes:
    """The status line and headers of the next response on ``connection``."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        chunk = connection.recv(1)
        assert chunk, f"the connection closed after {head!r}"
        head += chunk
    return head


def accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "nope://x"], "no installed backend serves nope://"),
        (["--store", "memory://", "--runs", "bad.db"], "has no scheme"),
        (["--store", "memory://", "--port", "70000"], "--port must be between 0 and 65535"),
        (
            ["--store", "memory://", "--max-request-bytes", "0"],
            "(--max-request-bytes) must be positive",
        ),
        (
            ["--store", "memory://", "--gzip-min-bytes", "-1"],
            "(--gzip-min-bytes) must not be negative",
        ),
    ],
)
def test_bad_configuration_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run_cli("serve", *args, env=LONG_ENOUGH)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_port_in_use_is_reported(tmp_path: Path) -> None:
    with serve("--store", "memory://") as server:
        port = server.url.rsplit(":", 1)[1].rstrip("/")
        result = run_cli(
            "serve",
            "--store",
            "memory://",
            "--port",
            port,
            env=LONG_ENOUGH,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_db_upgrade_and_current_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    # db current only reads: on a file that does not exist it says so, creating nothing.
    before = run_cli("db", "current", "--store", url)
    assert before.returncode == 2
    assert "no database at" in before.stderr
    assert not (tmp_path / "store.db").exists()
    upgraded = run_cli("db", "upgrade", "--store", url)
    assert upgraded.returncode == 0, upgraded.stderr
    # The schema's line; the workspaces' follows (docs/team.md).
    revision = upgraded.stdout.splitlines()[0].rsplit(" ", 1)[-1]
    assert revision
    assert revision != "(no schema)"
    current = run_cli("db", "current", "--store", url)
    assert current.stdout.strip() == f"{url}: {revision}"


def test_serve_with_no_migrate_does_not_create_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "store.db").touch(mode=0o600)  # --no-migrate creates no file either
    with serve("--store", url, "--no-migrate"):
        pass
    assert run_cli("db", "current", "--store", url).stdout.strip() == f"{url}: (no schema)"


def test_redact_hides_passwords() -> None:
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"
    assert redact("sqlite:///x.db") == "sqlite:///x.db"
    assert (
        redact("s3://b/p?access_key_id=AK&secret_access_key=SK&session_token=ST")
        == "s3://b/p?access_key_id=***&secret_access_key=***&session_token=***"
    )


def run_command(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_config_given_serve_s_options_says_where_they_go_in_one_line() -> None:
    # It said "invalid choice: '18100' (choose from 'show')" under the usage.
    done = run_command("config", "--port", "18100")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "bridge-store config: config shows the settings serve would run with, with its "
        "one command, show; serve's options go after it: bridge-store config show --port "
        "18100\n"
    )
    assert run_command("config", "show", "--port", "18100").stdout.count("port = 18100") == 1


def test_a_usage_mistake_is_one_line_naming_the_help_to_read() -> None:
    for argv, help_of in (
        (["agents", "--bogus"], "bridge-store agents"),
        (["config", "show", "--bogus"], "bridge-store config show"),
        (["serve", "--port", "x"], "bridge-store serve"),
        (["nothing"], "bridge-store"),
    ):
        done = run_command(*argv)
        assert done.returncode == 2, argv
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.endswith(f" (see {help_of} --help)\n"), done.stderr
        assert "usage:" not in done.stderr
