"""Where an embedded store's history can be seen while the bridge runs.

``launch()`` and ``bridge-store bridge`` start a store server of their own; its viewer
is only useful if its token can be read. These tests check where that token is kept
(a 0600 file beside a SQLite database, serve's ``./bridge-store.token`` for the command
otherwise, the environment's when set), that the viewer takes it, and that no output
ever holds the token itself.
"""

from __future__ import annotations

import argparse
import re
import signal
import stat
import time
from pathlib import Path

import httpx
import pytest

from bridge_store.cli.shared.store_options import DEFAULT_STORE_URL, STORE_FLAG_ENV, routes_from
from bridge_store.client import launch, start_sidecar
from bridge_store.client.viewer_access import (
    AGENTS_URL_ENV,
    agents_url,
    sqlite_file,
    token_file_beside,
)
from bridge_store.client.viewer_access import DEFAULT_STORE_URL as CLIENT_DEFAULT_STORE_URL
from bridge_store.errors import ConfigurationError
from bridge_store.security.tokens import TOKEN_ENV
from tests.support.fake_bridge import (
    WAIT_SECONDS,
    BridgeCommand,
    FakeBridge,
    bridge_command,
    fake_command_env,
    run_bridge_command,
)

VIEWER_LINE = re.compile(
    r"^bridge-store: history viewer at (\S+) \(sign in with the token in (.+)\)$"
)


@pytest.mark.parametrize(
    ("url", "database", "token_file"),
    [
        ("sqlite:///agents.db", "agents.db", "agents.token"),
        ("sqlite:////srv/a.db?busy_timeout=50", "/srv/a.db", "/srv/a.token"),
        ("sqlite:///history", "history", "history.token"),
        ("sqlite:///odd.token", "odd.token", "odd.token.token"),
        ("sqlite://", None, None),
        ("sqlite:///:memory:", None, None),
        ("postgresql://store@db.internal/bridge_store", None, None),
        ("memory://", None, None),
    ],
)  # fmt: skip
def test_a_sqlite_databases_token_file_is_beside_it(
    url: str, database: str | None, token_file: str | None
) -> None:
    found = sqlite_file(url)
    assert found == (Path(database) if database else None)
    if found is not None:
        assert token_file_beside(found) == Path(str(token_file))
        assert token_file_beside(found) != found


@pytest.mark.parametrize(
    ("flags", "environ"),
    [
        ({}, {}),
        ({"store": "sqlite:///a.db"}, {}),
        ({}, {"BRIDGE_STORE_URL": "sqlite:///env.db"}),
        ({"store": "sqlite:///flag.db"}, {"BRIDGE_STORE_URL": "sqlite:///env.db"}),
        ({"store": "memory://"}, {"BRIDGE_STORE_AGENTS_URL": "sqlite:///agents.db"}),
        ({"agents": "sqlite:///flag-agents.db"}, {"BRIDGE_STORE_AGENTS_URL": "memory://"}),
    ],
)
def test_the_agents_store_is_found_as_serve_finds_it(
    flags: dict[str, str], environ: dict[str, str]
) -> None:
    # The client cannot import the CLI (which imports it), so it keeps serve's names.
    assert CLIENT_DEFAULT_STORE_URL == DEFAULT_STORE_URL
    assert (STORE_FLAG_ENV["agents"], STORE_FLAG_ENV["store"]) == AGENTS_URL_ENV
    args = argparse.Namespace(**{name: flags.get(name) for name in STORE_FLAG_ENV})
    expected = routes_from(args, environ).agents
    assert agents_url(flags.get("store"), flags.get("agents"), environ) == expected


def viewer_takes(viewer_url: str, token: str) -> bool:
    answer = httpx.get(
        viewer_url + "?format=json", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    return answer.status_code == 200 and answer.json()["agents"] == []


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def test_launch_keeps_a_sqlite_stores_token_beside_it(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    command, env = fake_bridge.command, fake_bridge.env()
    with launch(store, bridge_command=command, env=env) as session:
        token_file = tmp_path / "agents.token"
        assert session.auth_token_file == token_file
        assert private(token_file)
        assert token_file.read_text().strip() == session.store_auth_token
        assert session.viewer_url == session.store_url + "ui/"
        assert viewer_takes(session.viewer_url, session.store_auth_token)
        first = session.store_auth_token
    # The next launch on the same database reads the file: the viewer's sign-in holds.
    with launch(store, bridge_command=command, env=env) as again:
        assert again.store_auth_token == first


def test_launch_on_a_store_of_no_file_keeps_a_fresh_token_in_memory(
    fake_bridge: FakeBridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with launch("memory://", bridge_command=fake_bridge.command, env=fake_bridge.env()) as session:
        assert session.auth_token_file is None
        assert session.viewer_url is not None
        assert viewer_takes(session.viewer_url, session.store_auth_token)
    assert list(workdir.iterdir()) == []


def test_launch_reads_an_existing_stores_token_from_a_file(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    with start_sidecar("memory://") as store:
        token_file = tmp_path / "store.token"
        token_file.write_text(store.auth_token + "\n")
        with launch(
            store_url=store.url,
            auth_token_file=token_file,
            bridge_command=fake_bridge.command,
            env=fake_bridge.env(),
        ) as session:
            assert session.store_auth_token == store.auth_token
            assert session.viewer_url is None  # the store's owner knows where it is
        with pytest.raises(ConfigurationError, match="auth_token or auth_token_file"):
            launch(store_url=store.url, auth_token="x" * 20, auth_token_file=token_file)


def viewer_line(command: BridgeCommand) -> re.Match[str]:
    """The command's line naming the viewer, printed right after the discovery JSON."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for line in list(command.stderr):
            if found := VIEWER_LINE.match(line.rstrip("\n")):
                return found
        time.sleep(0.05)
    raise AssertionError("no viewer line:\n" + "".join(command.stderr))


def stop(command: BridgeCommand) -> None:
    command.process.send_signal(signal.SIGTERM)
    assert command.process.wait(WAIT_SECONDS) == 0


def test_the_bridge_command_names_the_viewer_and_the_token_file_never_the_token(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    args = ["--store", store, "--bridge-bin", str(fake_bridge.launcher)]
    with bridge_command(*args, env=fake_command_env(fake_bridge)) as command:
        viewer_url, named = viewer_line(command).groups()
        token_file = tmp_path / "agents.token"
        assert named == str(token_file)
        assert private(token_file)
        token = token_file.read_text().strip()
        assert viewer_takes(viewer_url, token)
        stop(command)
    assert token not in "".join(command.stderr)
    assert token not in str(command.discovery)


def test_the_bridge_command_on_a_store_of_no_file_uses_serves_token_file(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    with bridge_command(*args, env=fake_command_env(fake_bridge), cwd=tmp_path) as command:
        viewer_url, named = viewer_line(command).groups()
        token_file = tmp_path / "bridge-store.token"
        assert named == str(token_file)
        assert private(token_file)
        assert viewer_takes(viewer_url, token_file.read_text().strip())
        stop(command)


def test_the_bridge_command_takes_serves_token_rules(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    chosen = tmp_path / "chosen.token"
    chosen.write_text("a-token-chosen-by-its-owner\n")
    chosen.chmod(0o600)
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    given = [*args, "--auth-token-file", str(chosen)]
    with bridge_command(*given, env=fake_command_env(fake_bridge), cwd=tmp_path) as command:
        viewer_url, named = viewer_line(command).groups()
        assert named == str(chosen)
        assert viewer_takes(viewer_url, "a-token-chosen-by-its-owner")
        stop(command)
    # The environment's token wins, as in serve; no file is written for it.
    environ = fake_command_env(fake_bridge, **{TOKEN_ENV: "a-token-from-the-environment"})
    workdir = tmp_path / "env"
    workdir.mkdir()
    with bridge_command(*args, env=environ, cwd=workdir) as command:
        viewer_url = viewer_line_from_environment(command)
        assert viewer_takes(viewer_url, "a-token-from-the-environment")
        stop(command)
    assert list(workdir.iterdir()) == []
    assert "a-token-from-the-environment" not in "".join(command.stderr)


def viewer_line_from_environment(command: BridgeCommand) -> str:
    pattern = re.compile(
        rf"^bridge-store: history viewer at (\S+) \(sign in with the token in \${TOKEN_ENV}\)$"
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for line in list(command.stderr):
            if found := pattern.match(line.rstrip("\n")):
                return found.group(1)
        time.sleep(0.05)
    raise AssertionError("no viewer line:\n" + "".join(command.stderr))


def test_a_token_file_that_cannot_be_written_stops_the_command_in_one_line(
    fake_bridge: FakeBridge, tmp_path: Path
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    args = ["--store", "memory://", "--bridge-bin", str(fake_bridge.launcher)]
    args += ["--auth-token-file", str(blocked / "store.token")]
    result = run_bridge_command(*args, env=fake_command_env(fake_bridge))
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bridge-store: cannot create the auth token file {blocked}/store.token")
    assert "Traceback" not in result.stderr
    assert not (fake_bridge.directory / "started.json").exists()
