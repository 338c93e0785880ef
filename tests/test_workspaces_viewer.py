"""The viewer and the CLI read agents by workspace: every checkout's, every directory's.

Agents are written as bridges in three checkouts write them (two of one repository,
one of another repository at the first one's path) and one bridge in no checkout;
``bridge-store agents``/``runs --workspace`` and the viewer's workspace filter then
show exactly the first repository's, reading the store directly and over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.workspaces import segment
from bridge_store.workspaces.paths import Checkout
from tests.support.history import agent, run
from tests.support.server import ServerProcess, StoreHttpClient, serve

APP = "github.com/org/app"
ALICE = Checkout(APP, "/home/alice/src/app")
BOB = Checkout(APP, "/Users/bob/app")
OTHER = Checkout("github.com/org/other", "/home/alice/src/app")
IN_APP = {"alice-root", "alice-web", "bob-root"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = tmp_path_factory.mktemp("workspaces") / "store.db"
    with serve("--store", f"sqlite:///{store}") as running:
        writes = [
            (ALICE, agent("alice-root", "a", ALICE.root, "idle", 1)),
            (ALICE, agent("alice-web", "b", ALICE.root + "/web", "idle", 2)),
            (BOB, agent("bob-root", "c", BOB.root, "idle", 3)),
            (OTHER, agent("other-root", "d", OTHER.root, "idle", 4)),
            (None, agent("plain", "e", "/srv/plain", "idle", 5)),
        ]
        for checkout, document in writes:
            base = running.url.rstrip("/") + "/"
            url = base if checkout is None else segment.store_url(base, checkout)
            client = StoreHttpClient(url, running.token)
            try:
                client.call("agents", "create", {"agent": document})
                made = run(document["agentId"], f"run-{document['agentId']}", 1, "finished")
                client.call("runs", "create", {"run": made})
            finally:
                client.close()
        yield running


def cli_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("how", ["direct", "remote"])
def test_agents_and_runs_of_one_workspace_on_the_command_line(
    server: ServerProcess, how: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if how == "direct":
        store = next(a for a in server.process.args if str(a).startswith("sqlite:"))  # type: ignore[union-attr]
        source = ["--store", str(store)]
    else:
        token_file = tmp_path / "token"
        token_file.write_text(server.token)
        source = ["--store-callback-url", server.url, "--store-auth-token-file", str(token_file)]
    agents = cli_lines(capsys, "agents", "--workspace", APP, "--json", *source)
    assert {row["agentId"] for row in agents} == IN_APP
    by_id = {row["agentId"]: row for row in agents}
    assert by_id["alice-web"]["workspace"] == {
        "id": APP,
        "directory": "web",
        "workedIn": ALICE.root + "/web",
    }
    runs = cli_lines(capsys, "runs", "--workspace", APP, "--json", *source)
    assert {row["agentId"] for row in runs} == IN_APP
    everyone = cli_lines(capsys, "agents", "--json", *source)
    assert {row["agentId"] for row in everyone} == {*IN_APP, "other-root", "plain"}


def test_the_viewer_groups_agents_by_workspace(server: ServerProcess) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    base = server.url.rstrip("/")
    page = httpx.get(f"{base}/ui/?workspace={APP}&format=json", headers=headers).json()
    assert {row["agentId"] for row in page["agents"]} == IN_APP
    html = httpx.get(f"{base}/ui/", headers=headers).text
    assert f"?workspace={APP.replace('/', '%2F')}" in html
    assert "last in <code>/Users/bob/app</code>" in html
    runs = httpx.get(f"{base}/ui/runs?workspace={APP}&format=json", headers=headers).json()
    assert {row["agentId"] for row in runs["runs"]} == IN_APP
