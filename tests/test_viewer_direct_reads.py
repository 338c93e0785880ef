"""The history commands reading a store directly (``agents``, ``runs``, ``transcript``
with ``--store``, and ``bridge-store ui --store``): one tenant at a time (``--tenant``),
and a store serve encrypts opened with serve's key file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.security.encryption import Keyring, key_id, parse_key
from bridge_store.server.app import create_app
from bridge_store.server.config import READY_PREFIX, ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .support.history import ANSWER, FINISHED_RUN, LOGIN_AGENT, PROMPT, history_calls
from .test_viewer_tenants import (
    B_ONLY_AGENT,
    B_PROMPT,
    WRITE_A,
    WRITE_B,
    registry,
    store,
    team_b_calls,
)

KEY = "11" * 32
OTHER_KEY = "22" * 32
STOP_TIMEOUT_SECONDS = 30


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A SQLite store serve wrote with an encryption key, for tenants team-a and team-b."""
    where = tmp_path_factory.mktemp("sealed")
    url = f"sqlite:///{where / 'store.db'}"
    key_file = where / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    config = ServerConfig(
        routes=Routes.single(url), tokens=registry(), keyring=Keyring([parse_key(KEY)])
    )
    with running(create_app(config)) as base:
        store(base, WRITE_A, history_calls())
        store(base, WRITE_B, team_b_calls())
    return url, key_file


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def agent_ids(out: str) -> list[str]:
    return [json.loads(line)["agentId"] for line in out.splitlines()]


def test_each_tenant_is_read_with_the_key(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, Path]
) -> None:
    url, key_file = sealed
    keyed = ["--store", url, "--encryption-key-file", str(key_file)]
    code, out, err = cli(capsys, "agents", "--json", "--tenant", "team-b", *keyed)
    assert code == 0, err
    assert agent_ids(out) == [LOGIN_AGENT, B_ONLY_AGENT]
    assert "sdkMetadata" not in out  # opened, and still never shown
    code, out, _ = cli(capsys, "agents", "--json", "--tenant", "team-a", *keyed)
    assert agent_ids(out)[0] == LOGIN_AGENT
    assert len(agent_ids(out)) == 2
    # Without the key too: the sealed sdkMetadata is the one thing it seals, never shown.
    code, out, _ = cli(capsys, "agents", "--json", "--tenant", "team-b", "--store", url)
    assert agent_ids(out) == [LOGIN_AGENT, B_ONLY_AGENT]
    assert "sdkMetadata" not in out
    # Without --tenant: tenant default, which holds nothing here.
    assert cli(capsys, "agents", "--json", *keyed)[:2] == (0, "")
    code, out, _ = cli(
        capsys,
        "transcript",
        FINISHED_RUN,
        "--agent",
        LOGIN_AGENT,
        "--markdown",
        "--tenant",
        "team-b",
        *keyed,
    )
    assert code == 0
    assert B_PROMPT in out
    assert PROMPT not in out
    code, out, _ = cli(capsys, "transcript", FINISHED_RUN, "--tenant", "team-a", *keyed)
    assert ANSWER in out
    code, out, err = cli(capsys, "runs", B_ONLY_AGENT, "--json", "--tenant", "team-a", *keyed)
    assert (code, out) == (1, "")
    assert err.startswith("bridge-store: not_found: ")


def test_a_wrong_key_or_tenant_is_one_line(
    capsys: pytest.CaptureFixture[str], sealed: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = sealed
    wrong = tmp_path / "wrong"
    wrong.write_text(OTHER_KEY + "\n")
    wrong.chmod(0o600)
    code, out, err = cli(
        capsys, "agents", "--tenant", "team-a", "--store", url, "--encryption-key-file", str(wrong)
    )
    assert code == 1
    assert out == ""
    assert err.startswith("bridge-store: failed_precondition: ")
    assert key_id(parse_key(KEY)).hex() in err  # the key the items need
    assert len(err.splitlines()) == 1
    code, _, err = cli(capsys, "agents", "--tenant", "Team A", "--store", url)
    assert code == 2
    assert err.startswith("bridge-store: --tenant: tenant 'Team A' must be")
    code, _, err = cli(
        capsys, "agents", "--tenant", "team-a", "--store-callback-url", "http://127.0.0.1:9"
    )
    assert code == 2
    assert "through a server, its token's tenant is read" in err


def test_ui_serves_one_tenant_of_a_sealed_store(sealed: tuple[str, Path], tmp_path: Path) -> None:
    url, key_file = sealed
    token_file = tmp_path / "ui.token"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bridge_store",
            "ui",
            "--port",
            "0",
            "--store",
            url,
            "--auth-token-file",
            str(token_file),
            "--tenant",
            "team-b",
            "--encryption-key-file",
            str(key_file),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        line = next(line for line in process.stderr if line.startswith(READY_PREFIX))
        base = json.loads(line.removeprefix(READY_PREFIX))["url"]
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        with httpx.Client(base_url=base, headers=headers) as client:
            agents = client.get("?format=json").json()["agents"]
            assert [a["agentId"] for a in agents] == [LOGIN_AGENT, B_ONLY_AGENT]
            transcript = client.get(f"run?agent={LOGIN_AGENT}&id={FINISHED_RUN}").text
            assert B_PROMPT in transcript
            assert PROMPT not in transcript
            hits = client.get("search?q=redirect&format=json").json()["hits"]
            assert [hit["text"] for hit in hits] == [B_PROMPT]
            export = client.get(f"export/agent.jsonl?id={LOGIN_AGENT}").text
            assert "sdkMetadata" not in export
            assert ANSWER not in export
    finally:
        process.terminate()
        process.communicate(timeout=STOP_TIMEOUT_SECONDS)
