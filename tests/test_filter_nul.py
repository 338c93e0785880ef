"""A NUL in a filter gets one answer on every backend: a 400 naming the parameter.

No store can key by NUL: Postgres refused such a filter (400) while memory, SQLite and
Redis looked for it and found nothing (200 with no rows). Every parameter of every
viewer page and export, and every filter of the read commands, is now refused the
same way before any backend sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .support.history import history_calls

TOKEN = "filter-nul-token-0123"
NUL = "a\x00b"

#: Each page or export and the parameters it reads, with the others it needs.
PAGES = {
    "/ui/": ({}, ["cwd", "status", "name", "cursor", "limit", "archived"]),
    "/ui/agent": ({"id": "agent-login"}, ["id"]),
    "/ui/runs": ({}, ["status", "model", "cwd", "since", "until", "by", "sort", "cursor"]),
    "/ui/overview": ({}, ["days", "to"]),
    "/ui/run": ({"agent": "agent-login", "id": "run-login-1"}, ["agent", "id", "after", "limit"]),
    "/ui/events": ({"agent": "agent-login", "run": "run-login-1"}, ["agent", "run", "after"]),
    "/ui/outline": ({"agent": "agent-login", "id": "run-login-1"}, ["agent", "id"]),
    "/ui/search": ({"q": "redirect"}, ["q", "cursor"]),
    "/ui/export/run.jsonl": ({"agent": "agent-login", "run": "run-login-1"}, ["agent", "run"]),
    "/ui/export/agent.jsonl": ({"id": "agent-login"}, ["id"]),
    "/ui/export/transcript.md": ({"agent": "agent-login", "run": "run-login-1"}, ["agent", "run"]),
}


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        store = "memory://"
    elif request.param == "sqlite":
        store = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        make: Callable[[], str] = request.getfixturevalue(f"make_{request.param}_url")
        store = make()
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    with running(app, access_log=False) as url:
        for substore, method, data in history_calls():
            answer = httpx.post(
                url + CALL_STORE_PATH,
                json={"substore": substore, "method": method, "input": data},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert answer.status_code == 200, answer.text
        yield url


def test_every_viewer_parameter_with_a_nul_is_a_400_naming_it(server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers) as client:
        for path, (given, names) in PAGES.items():
            for name in names:
                params = {**given, name: NUL}
                shapes = ["json"] if "export" in path else ["json", "html"]
                for shape in shapes:
                    if shape == "json" and "export" not in path:
                        params["format"] = "json"
                    else:
                        params.pop("format", None)
                    answer = client.get(path, params=params)
                    assert answer.status_code == 400, (path, name, shape, answer.text[:300])
                    expected = f"the {name!r} parameter must not contain NUL"
                    if shape == "json":
                        assert answer.json() == {"code": "invalid_argument", "message": expected}
                    else:
                        assert expected.replace("'", "&#39;") in answer.text


def test_read_commands_refuse_a_nul_in_one_line(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    remote = ["--store-callback-url", server, "--store-auth-token-file", str(token_file)]
    direct = ["--store", f"sqlite:///{tmp_path / 'direct.db'}"]
    capsys.readouterr()
    for source in (remote, direct):
        for argv, flag in (
            (["agents", "--cwd", NUL], "--cwd"),
            (["agents", "--name", NUL], "--name"),
            (["runs", "--model", NUL], "--model"),
            (["runs", "--by", NUL], "--by"),
            (["runs", NUL], "AGENT_ID"),
            (["transcript", NUL], "RUN_ID"),
            (["transcript", "run-login-1", "--agent", NUL], "--agent"),
            (["overview", "--to", NUL], "--to"),
        ):
            assert main([*argv, *source]) == 2, argv
            out, err = capsys.readouterr()
            assert out == ""
            assert err == f"bridge-store: {flag} must not contain NUL\n", argv


@pytest.mark.parametrize(
    ("argv", "label"),
    [
        (["prune", "--older-than", "1d", "--cwd", NUL], "--cwd"),
        (["export-runs", "--to", "http://127.0.0.1:1", "--agent", NUL], "--agent"),
        (["export", "--output", NUL], "--output"),
        (["token", "revoke", NUL], "name"),
        (["agents", "--store", f"sqlite:///{NUL}"], "--store"),
    ],
)
def test_every_command_refuses_a_nul_argument_in_one_line(
    argv: list[str], label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Filters that reach a backend, names, paths and URLs: refused before the command
    # runs, naming the flag, whatever the command would have made of it.
    if argv[0] == "prune":
        argv = [*argv, "--store", f"sqlite:///{tmp_path / 'x.db'}"]
    if argv[0] == "token":
        argv = [*argv, "--tokens-file", str(tmp_path / "tokens.toml")]
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"bridge-store: {label} must not contain NUL\n")
