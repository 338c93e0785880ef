"""``bridge-store token`` and ``serve --tokens-file``: named tokens on a running server."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.errors import Code, ConnectError
from bridge_store.security.auth import Scope
from bridge_store.security.tokens_file import add_token
from tests.support.server import StoreHttpClient, serve

AGENT = {"agentId": "agent-1", "cwd": "/w", "updatedAt": 1, "status": "idle"}


def test_token_add_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "tokens.toml")
    assert main(["token", "add", "alice", "--tenant", "team-a", "--scope", "write",
                 "--tokens-file", path]) == 0  # fmt: skip
    token = capsys.readouterr().out.strip()
    assert len(token) >= 32
    assert main(["token", "list", "--tokens-file", path]) == 0
    listing = capsys.readouterr().out
    assert "alice" in listing
    assert "team-a" in listing
    assert token not in listing
    assert main(["token", "revoke", "alice", "--tokens-file", path]) == 0
    assert main(["token", "list", "--tokens-file", path]) == 0
    assert "alice" not in capsys.readouterr().out


def test_token_commands_name_their_mistakes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRIDGE_STORE_TOKENS_FILE", raising=False)
    assert main(["token", "list"]) == 2
    assert "--tokens-file PATH or BRIDGE_STORE_TOKENS_FILE" in capsys.readouterr().err
    path = str(tmp_path / "t.toml")
    assert main(["token", "add", "a", "--tenant", "Team A", "--scope", "read",
                 "--tokens-file", path]) == 2  # fmt: skip
    assert "a tenant is 1-63 characters" in capsys.readouterr().err
    assert main(["token", "revoke", "nobody", "--tokens-file", path]) == 2
    assert not Path(path).exists()


#: Answers in a row that must agree before a change counts as seen: each call opens a
#: new connection, so under ``--workers 2`` both workers answer some of them.
IN_A_ROW = 8


def wait_until_refused(client: StoreHttpClient, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    refusals: list[ConnectError] = []
    while len(refusals) < IN_A_ROW:
        try:
            client.call("agents", "get", {"agentId": "x"})
        except ConnectError as error:
            refusals.append(error)
            continue
        refusals.clear()
        assert time.monotonic() < deadline, "the revoked token was still accepted"
        time.sleep(0.1)
    assert {refused.code for refused in refusals} == {Code.UNAUTHENTICATED}


def listed(client: StoreHttpClient) -> list[Any]:
    """The agents ``IN_A_ROW`` list calls answer, each on a new connection."""
    return [client.call("agents", "list", {})["items"] for _ in range(IN_A_ROW)]


@pytest.mark.parametrize("workers", [1, 2], ids=["one-worker", "two-workers"])
def test_serve_with_named_tokens_tenants_scopes_and_revocation(
    tmp_path: Path, workers: int
) -> None:
    path = tmp_path / "tokens.toml"
    alice = add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    bob = add_token(path, "bob", tenant="team-b", scope=Scope.WRITE)
    viewer = add_token(path, "viewer", tenant="team-a", scope=Scope.READ)
    store = "memory://" if workers == 1 else f"sqlite:///{tmp_path / 'store.db'}"
    with serve(
        "--store", store, "--workers", str(workers), tokens_file=path, token=alice
    ) as server:
        as_bob = StoreHttpClient(server.url, bob, new_connections=True)
        as_viewer = StoreHttpClient(server.url, viewer, new_connections=True)
        server.call("agents", "create", {"agent": AGENT})
        assert listed(as_bob) == [[]] * IN_A_ROW
        assert listed(as_viewer) == [[AGENT]] * IN_A_ROW
        with pytest.raises(ConnectError) as refused:
            as_viewer.call("agents", "create", {"agent": {**AGENT, "agentId": "agent-2"}})
        assert refused.value.code == Code.PERMISSION_DENIED
        # A changed file is noticed within the server's once-a-second check.
        main(["token", "revoke", "bob", "--tokens-file", str(path)])
        wait_until_refused(as_bob, seconds=10)
        # SIGHUP reloads: the file is rewritten in place with the same size and mtime
        # (the viewer moves to team-b), so only the signal can tell the server (under
        # --workers, the parent passes it on to each worker).
        before = os.stat(path)
        text = path.read_text()
        path.write_text(
            text.replace('tenant = "team-a"\nscope = "read"', 'tenant = "team-b"\nscope = "read"')
        )
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_size == before.st_size
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        seen_in_a_row = 0
        while seen_in_a_row < IN_A_ROW:
            moved = as_viewer.call("agents", "list", {})["items"] == []
            seen_in_a_row = seen_in_a_row + 1 if moved else 0
            assert time.monotonic() < deadline, "SIGHUP did not reload the tokens file"
        assert server.call("agents", "get", {"agentId": "agent-1"}) == AGENT
        as_bob.close()
        as_viewer.close()


def test_serve_refuses_tokens_file_with_the_one_token_shorthand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tokens.toml"
    add_token(path, "alice", tenant="team-a", scope=Scope.WRITE)
    assert main(["serve", "--store", "memory://", "--tokens-file", str(path),
                 "--auth-token-file", str(tmp_path / "t")]) == 2  # fmt: skip
    assert "replaces the one-token shorthand" in capsys.readouterr().err
