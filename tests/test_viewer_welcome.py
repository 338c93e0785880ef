"""The viewer's empty agents page: the command that connects a bridge, and the tenants.

An empty store shows the exact ``bridge-store bridge`` command for this server (its
URL, where its token is). A store whose signed-in tenant is empty while others hold
history names those tenants and how to read them, to whoever holds the store itself
(the one-token shorthand, ``bridge-store ui``), never to a named token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.cli.shared.program import this_program
from bridge_store.client import start_sidecar
from bridge_store.client._process import START_TIMEOUT_SECONDS, StderrPump
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.security.tokens import TOKEN_ENV
from bridge_store.server.app import create_app
from bridge_store.server.config import READY_PREFIX, ServerConfig
from bridge_store.stack.stores import Routes, StoreStack
from bridge_store.viewer.reader import HistoryReader
from bridge_store.viewer.standalone import create_ui_app
from bridge_store.viewer.welcome import BridgeHint, Welcome
from testkit.inprocess import running

from .support.history import LOGIN_AGENT, agent

SHORTHAND = "the-one-token-of-this-store"
WRITER_A = "team-a-writer-token"
READER_B = "team-b-reader-token"
TOKEN_FILE = "/srv/store/bridge-store.token"


def named_tokens() -> TokenRegistry:
    return TokenRegistry(
        [
            TokenEntry("a-writer", token_digest(WRITER_A), "team-a", Scope.WRITE),
            TokenEntry("b-reader", token_digest(READER_B), "team-b", Scope.READ),
        ]
    )


@pytest.fixture
def team_a_store(tmp_path: Path) -> str:
    """A SQLite store holding one agent, in tenant team-a only."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    app = create_app(ServerConfig(routes=Routes.single(url), tokens=named_tokens()))
    with running(app) as base:
        created = httpx.post(
            base + CALL_STORE_PATH,
            json={
                "substore": "agents",
                "method": "create",
                "input": {"agent": agent(LOGIN_AGENT, "fix login", "/src/app", "idle", 1)},
            },
            headers={"Authorization": f"Bearer {WRITER_A}"},
        )
        assert created.status_code == 200, created.text
    return url


def agents_page(base: str, token: str, query: str = "") -> tuple[dict[str, Any], str]:
    """The agents page's JSON twin and its HTML, read with ``token``."""
    headers = {"Authorization": f"Bearer {token}"}
    data = httpx.get(f"{base}/ui/?format=json{query}", headers=headers).json()
    html = httpx.get(f"{base}/ui/?{query.lstrip('&')}", headers=headers).text
    return data, html


def test_an_empty_store_shows_the_command_that_connects_a_bridge_here() -> None:
    config = ServerConfig(
        routes=Routes.single("memory://"),
        auth_token=SHORTHAND,
        bridge_hint=BridgeHint(token_file=TOKEN_FILE),
    )
    with running(create_app(config)) as base:
        data, html = agents_page(base, SHORTHAND)
        command = (
            f"bridge-store bridge --store-callback-url {base}/ --store-auth-token-file {TOKEN_FILE}"
        )
        assert data["welcome"]["command"] == command
        # What a run needs, and the same command without it, offline.
        assert data["welcome"]["runNote"].startswith(
            "Agents and runs need a Cursor API key (CURSOR_API_KEY) and the Cursor API. "
            "Without them, add --offline"
        )
        assert data["welcome"]["offlineCommand"] == f"{command} --offline"
        assert f"<code>{command} --offline</code>" in html
        assert data["welcome"]["tenant"] == "default"
        assert "otherTenants" not in data["welcome"]
        assert f"<code>{command}</code>" in html
        assert "lands in tenant default unless it is given --tenant NAME" in html
        assert SHORTHAND not in html
        # A filtered page that matches nothing is not the first page: no welcome there.
        filtered, html = agents_page(base, SHORTHAND, "&name=nothing")
        assert "welcome" not in filtered
        assert "No agents match the filters" in html


def test_the_shorthand_holder_learns_which_tenants_hold_history(team_a_store: str) -> None:
    config = ServerConfig(routes=Routes.single(team_a_store), auth_token=SHORTHAND)
    with running(create_app(config)) as base:
        data, html = agents_page(base, SHORTHAND)
    welcome = data["welcome"]
    assert welcome["otherTenants"] == ["team-a"]
    assert "--tenant team-a" in welcome["chooseTenant"]
    assert "token add NAME --tenant team-a" in welcome["chooseTenant"]
    assert "This store holds history in tenant team-a." in html
    # The token came from the environment here: the page names the variable.
    assert welcome["command"] == f"bridge-store bridge --store-callback-url {base}/"
    assert "$BRIDGE_STORE_AUTH_TOKEN" in welcome["connectNote"]


def test_a_named_token_never_learns_of_other_tenants(team_a_store: str) -> None:
    config = ServerConfig(routes=Routes.single(team_a_store), tokens=named_tokens())
    with running(create_app(config)) as base:
        data, html = agents_page(base, READER_B)
    welcome = data["welcome"]
    assert welcome["tenant"] == "team-b"
    assert "otherTenants" not in welcome
    assert "team-a" not in html
    assert welcome["command"].endswith("--store-auth-token-file FILE")
    assert "--tenant team-b --scope write" in welcome["connectNote"]


def test_the_standalone_viewer_names_the_tenants_and_its_tenant_flag(team_a_store: str) -> None:
    reader = TokenRegistry([TokenEntry("ui", token_digest(SHORTHAND), "default", Scope.READ)])
    app = create_ui_app(StoreStack.of(Routes.single(team_a_store)), reader)
    with running(app) as base:
        data, _ = agents_page(base, SHORTHAND)
    welcome = data["welcome"]
    assert welcome["otherTenants"] == ["team-a"]
    assert welcome["chooseTenant"] == "Start this viewer with --tenant team-a to read that tenant."
    # It has no CallStore endpoint: bridges write through a server on the same store.
    assert welcome["command"] == "bridge-store serve --store URL"


def test_the_bridges_embedded_store_names_its_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "agents.token"
    token_file.write_text(SHORTHAND + "\n")
    token_file.chmod(0o600)
    with start_sidecar("memory://", auth_token=SHORTHAND, auth_token_file=token_file) as sidecar:
        base = sidecar.url.rstrip("/")
        data, _ = agents_page(base, SHORTHAND)
        argv = sidecar.process.args
        assert isinstance(argv, list)
        assert "--auth-token-file" in argv
        assert SHORTHAND not in argv
    assert data["welcome"]["command"].endswith(f"--store-auth-token-file {token_file}")


async def test_only_valid_tenant_names_are_ever_shown() -> None:
    # A store written around the server could hold any key; none of it reaches a page
    # or a terminal unless it is a tenant name (no markup, no terminal escapes).
    async def hostile() -> list[str]:
        return ["team-a", "\x1b[2J\x1b]0;owned\x07", "<script>x</script>", "default"]

    welcome = Welcome("default", BridgeHint(token_env=True), hostile)
    assert (await welcome.describe("http://s/"))["otherTenants"] == ["team-a"]

    async def no_calls(substore: str, method: str, data: dict[str, Any]) -> None:
        raise AssertionError("listing tenants makes no CallStore call")

    reader = HistoryReader(no_calls, tenant="default", tenants=hostile)
    assert await reader.other_tenants() == ["team-a"]


def test_a_hostile_host_header_never_reaches_the_page_as_markup() -> None:
    config = ServerConfig(routes=Routes.single("memory://"), auth_token=SHORTHAND)
    with running(create_app(config)) as base:
        for host in ('evil"><script>alert(1)</script>', "x' onmouseover='alert(1)"):
            page = httpx.get(
                f"{base}/ui/", headers={"Authorization": f"Bearer {SHORTHAND}", "Host": host}
            )
            assert page.status_code == 200
            assert "<script>alert" not in page.text
            assert "onmouseover='alert" not in page.text


def empty_page_command(argv: list[str], cwd: Path, path: str) -> str:
    """The command an empty store's page shows, served by ``argv`` (serve's arguments
    appended) in ``cwd`` with ``path`` as the PATH."""
    environ = {**os.environ, "PATH": path}
    environ.pop(TOKEN_ENV, None)
    server = subprocess.Popen(
        [*argv, "serve", "--port", "0", "--store", "memory://"],
        cwd=cwd,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        ready = StderrPump(server.stderr, READY_PREFIX, None).wait_ready(START_TIMEOUT_SECONDS)
        assert ready is not None, "serve printed no ready line"
        url = json.loads(ready.removeprefix(READY_PREFIX))["url"]
        token = (cwd / "bridge-store.token").read_text().strip()
        data, _ = agents_page(url.rstrip("/"), token)
    finally:
        server.terminate()
        server.wait(START_TIMEOUT_SECONDS)
    command: str = data["welcome"]["command"]
    return command


def test_the_empty_page_prints_the_command_as_it_will_run(tmp_path: Path) -> None:
    # After the README's install the venv is never activated: "bridge-store bridge"
    # was not on the PATH. The page names the program the way it was started.
    script = Path(sys.executable).with_name("bridge-store")
    no_venv = "/usr/local/bin:/usr/bin:/bin"
    token_file = tmp_path / "bridge-store.token"
    by_path = empty_page_command([str(script)], tmp_path, no_venv)
    assert by_path.startswith(f"{script} bridge --store-callback-url http://127.0.0.1:")
    assert by_path.endswith(f" --store-auth-token-file {token_file}")
    by_name = empty_page_command([str(script)], tmp_path, f"{script.parent}:{no_venv}")
    assert by_name.startswith("bridge-store bridge --store-callback-url ")
    by_module = empty_page_command([sys.executable, "-m", "bridge_store"], tmp_path, no_venv)
    assert by_module.startswith(f"{sys.executable} -m bridge_store bridge --store-callback-url ")


def test_a_program_under_the_working_directory_is_shown_from_there(tmp_path: Path) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "bridge-store").touch(mode=0o755)
    cwd = str(tmp_path)
    shown = this_program(".venv/bin/bridge-store", environ={"PATH": "/usr/bin"}, cwd=cwd)
    assert shown == ".venv/bin/bridge-store"
    absolute = this_program(str(venv_bin / "bridge-store"), environ={"PATH": "/usr/bin"}, cwd=cwd)
    assert absolute == ".venv/bin/bridge-store"
    on_path = this_program(".venv/bin/bridge-store", environ={"PATH": str(venv_bin)}, cwd=cwd)
    assert on_path == "bridge-store"
    spaced = tmp_path / "my projects"
    spaced.mkdir()
    quoted = this_program(str(venv_bin / "bridge-store"), environ={}, cwd=str(spaced))
    assert quoted == str(venv_bin / "bridge-store")
    python = this_program(
        "/x/bridge_store/__main__.py", executable=f"{spaced}/.venv/bin/python", cwd=str(spaced)
    )
    assert python == ".venv/bin/python -m bridge_store"
    outside = this_program("/x/bridge_store/__main__.py", executable="/opt/py 3/python", cwd=cwd)
    assert outside == "'/opt/py 3/python' -m bridge_store"
