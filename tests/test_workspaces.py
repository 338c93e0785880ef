"""Workspaces: a checkout's identity, the URL segment that carries it, the translation
of agent paths, and the hostile inputs each can meet (docs/team.md)."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from bridge_store.client.workspace import bridge_workspace, rules_from
from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store.ops.logs import SkipCallStoreAccess
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.auth import Principal, Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import BridgeStoreServer, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.workspaces import segment, translate
from bridge_store.workspaces.identity import checkout_of, normalized_remote, parse_rule
from bridge_store.workspaces.paths import Checkout, at, inside, key, parse_key
from bridge_store.workspaces.translate import WORKED_IN
from testkit.inprocess import running

ALICE = Checkout("github.com/org/app", "/home/alice/src/app")
BOB = Checkout("github.com/org/app", "/Users/bob/work/app")
OTHER = Checkout("github.com/org/other", "/home/alice/src/app")  # same path, other repo


def agent(agent_id: str, cwd: str, updated: int = 1) -> dict[str, Any]:
    return {
        "agentId": agent_id,
        "cwd": cwd,
        "status": "idle",
        "activeRunId": None,
        "name": agent_id,
        "createdAt": 1,
        "updatedAt": updated,
        "latestCheckpoint": None,
        "sdkMetadata": {},
    }


# -- the identity of a remote -----------------------------------------------------------


def test_every_spelling_of_one_remote_is_one_workspace() -> None:
    spellings = [
        "git@github.com:org/app.git",
        "https://github.com/org/app",
        "ssh://git@github.com/org/app.git",
        "ssh://git@GitHub.com:22/org/app.git/",
        "https://github.com/org/app.git",
    ]
    assert {normalized_remote(url, "/src") for url in spellings} == {"github.com/org/app"}
    assert normalized_remote("git@github.com:org/other.git", "/src") == "github.com/org/other"


def test_credentials_in_a_remote_url_are_dropped() -> None:
    for url in (
        "https://alice:ghp_SECRET@github.com/org/app.git",
        "https://ghp_SECRET@github.com/org/app",
        "ssh://alice:ghp_SECRET@github.com/org/app.git",
    ):
        workspace = normalized_remote(url, "/src")
        assert workspace == "github.com/org/app"
        assert "SECRET" not in segment.encode(Checkout(workspace, "/src"))


def test_a_remote_that_is_a_local_path_is_that_path_wherever_it_is_named_from() -> None:
    assert normalized_remote("/srv/git/app.git", "/home/a/app") == "local:srv/git/app"
    assert normalized_remote("../remotes/app.git", "/srv/a") == "local:srv/remotes/app"
    assert normalized_remote("../../remotes/app.git", "/srv/b/c") == "local:srv/remotes/app"
    assert normalized_remote("file:///srv/git/app.git", "/x") == "local:srv/git/app"
    # No repository: nothing to share.
    for url in ("", "https://github.com/", "https://github.com/..", "git@host:\x00x"):
        assert normalized_remote(url, "/x") is None


# -- paths and keys -----------------------------------------------------------------------


def test_a_cwd_with_dot_dot_is_inside_only_where_it_resolves_inside() -> None:
    root = "/home/bob/app"
    assert inside(root, "/home/bob/app") == ""
    assert inside(root, "/home/bob/app/src/ui") == "src/ui"
    assert inside(root, "/home/bob/app/src/../lib/") == "lib"
    assert inside(root, "/home/bob/app/../other") is None
    assert inside(root, "/home/bob/app/../app-evil/x") is None
    assert inside(root, "/home/bob/application") is None
    assert inside(root, "relative/path") is None
    assert inside("C:\\src\\app", "c:\\SRC\\app\\ui") == "ui"
    assert at("C:\\src\\app", "ui/x") == "C:\\src\\app\\ui\\x"


def test_a_key_that_would_climb_out_of_a_checkout_is_not_one() -> None:
    assert parse_key(key("github.com/org/app", "src/ui")) == ("github.com/org/app", "src/ui")
    for bad in (
        "workspace:github.com/org/app//../../etc",
        "workspace:github.com/org/app//a//b",
        "workspace:github.com/org/app//./a",
        "workspace:",
        "workspace:-x",
    ):
        assert parse_key(bad) is None, bad
        with pytest.raises(ConnectError) as raised:
            translate.inbound(None, "agents", "create", {"agent": agent("a", bad)})
        assert raised.value.code == Code.INVALID_ARGUMENT


# -- the segment -------------------------------------------------------------------------


def test_a_segment_carries_its_checkout_and_nothing_else_is_accepted() -> None:
    assert segment.decode(segment.encode(ALICE)) == ALICE
    unicode = Checkout("local:srv/dépôt", "/home/zoë/dépôt")
    assert segment.decode(segment.encode(unicode)) == unicode
    made = segment.encode
    bad = [
        "",
        "!!!",
        "a" * (segment.MAX_SEGMENT_CHARS + 1),
        made(Checkout("github.com/org/app", "relative/root")),
        made(Checkout("github.com/org/app", "/home/a/../b")),
        made(Checkout("github.com//app", "/home/a")),
        made(Checkout("x" * 600, "/home/a")),
        made(Checkout("github.com/org/app", "/" + "a" * 3000)),
        made(Checkout("github.com/org/app", "/home/a\nb")),
        "bnVsbA",  # null
        "eyJ2IjoyLCJ3IjoiYSIsInIiOiIvYSJ9",  # version 2
    ]
    for text in bad:
        with pytest.raises(ConnectError) as raised:
            segment.decode(text)
        assert raised.value.code == Code.INVALID_ARGUMENT, text


# -- translation -----------------------------------------------------------------------


def test_a_cwd_inside_the_checkout_is_kept_against_the_workspace() -> None:
    written = translate.inbound(
        ALICE, "agents", "create", {"agent": agent("a1", "/home/alice/src/app/web")}
    )["agent"]
    assert written["cwd"] == "workspace:github.com/org/app//web"
    assert written[WORKED_IN] == "/home/alice/src/app/web"
    # Bob sees it in his checkout; the other repository at Alice's path, and a caller
    # in no checkout, where it was last worked on; nobody sees the field.
    assert translate.agent_out(BOB, written)["cwd"] == "/Users/bob/work/app/web"
    assert translate.agent_out(OTHER, written)["cwd"] == "/home/alice/src/app/web"
    assert translate.agent_out(None, written)["cwd"] == "/home/alice/src/app/web"
    for checkout in (ALICE, BOB, OTHER, None):
        assert WORKED_IN not in translate.agent_out(checkout, written)
    # Outside the checkout, or in no checkout: the path as given.
    outside = translate.inbound(ALICE, "agents", "update", {"agent": agent("a1", "/tmp/x")})
    assert outside["agent"] == agent("a1", "/tmp/x")
    # A caller's own WORKED_IN is not kept.
    faked = {**agent("a1", "/tmp/x"), WORKED_IN: "/etc"}
    assert WORKED_IN not in translate.inbound(None, "agents", "create", {"agent": faked})["agent"]
    # Filters: Bob's checkout root is the workspace's root.
    listed = translate.inbound(BOB, "agents", "list", {"filter": {"cwd": "/Users/bob/work/app"}})
    assert listed["filter"]["cwd"] == "workspace:github.com/org/app"
    deleted = translate.inbound(BOB, "agents", "delete", {"filter": {"cwd": "/elsewhere"}})
    assert deleted["filter"]["cwd"] == "/elsewhere"


# -- identity from git --------------------------------------------------------------------


def git(*args: str | Path) -> str:
    done = subprocess.run(
        ["git", *map(str, args)], check=True, capture_output=True, text=True, timeout=30
    )
    return done.stdout


@pytest.fixture
def repositories(tmp_path: Path) -> dict[str, Path]:
    bare = tmp_path / "remotes" / "app.git"
    git("init", "-q", "--bare", bare)
    alice, bob = tmp_path / "alice" / "app", tmp_path / "bob" / "checkout"
    for clone in (alice, bob):
        git("clone", "-q", bare, clone)
        (clone / "src").mkdir()
    seeded = tmp_path / "seed"
    git("init", "-q", seeded)
    (seeded / "f").write_text("x")
    git("-C", seeded, "-c", "user.name=t", "-c", "user.email=t@t", "add", "f")
    git("-C", seeded, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed")
    git("-C", seeded, "push", "-q", bare, "HEAD:refs/heads/main")
    return {"bare": bare, "alice": alice, "bob": bob, "tmp": tmp_path}


def test_two_clones_are_one_workspace_each_at_its_own_root(repositories: dict[str, Path]) -> None:
    alice = checkout_of(repositories["alice"] / "src")
    bob = checkout_of(repositories["bob"])
    assert alice is not None
    assert bob is not None
    assert (
        alice.workspace
        == bob.workspace
        == "local:" + str(repositories["bare"].with_suffix("")).lstrip("/")
    )
    assert (alice.root, bob.root) == (str(repositories["alice"]), str(repositories["bob"]))


def test_a_worktree_whose_git_is_a_file_is_the_same_workspace(
    repositories: dict[str, Path],
) -> None:
    alice = repositories["alice"]
    git("-C", alice, "fetch", "-q")
    tree = repositories["tmp"] / "tree"
    git("-C", alice, "worktree", "add", "-q", tree, "origin/main")
    assert (tree / ".git").is_file()
    found = checkout_of(tree)
    assert found == Checkout(checkout_of(alice).workspace, str(tree))  # type: ignore[union-attr]
    # A .git file pointing nowhere is no checkout: the path stays a path.
    broken = repositories["tmp"] / "broken"
    broken.mkdir()
    (broken / ".git").write_text("gitdir: /nowhere/at/all\n")
    assert checkout_of(broken) is None


def test_a_symlink_to_another_checkout_is_that_checkout(repositories: dict[str, Path]) -> None:
    link = repositories["tmp"] / "link"
    link.symlink_to(repositories["alice"])
    found = checkout_of(link / "src")
    assert found == checkout_of(repositories["alice"])
    # The bridge is then told the real directory: the server maps paths, not links.
    where = bridge_workspace("http://127.0.0.1:1", link / "src")
    assert where.directory == str(repositories["alice"] / "src")
    assert where.store_url.startswith("http://127.0.0.1:1/w/")
    # A workspace's URL already (workspace-url printed it) is taken as it is.
    again = bridge_workspace(where.store_url, link / "src")
    assert (again.store_url, again.checkout) == (where.store_url, None)


def test_no_git_or_no_remote_stays_a_path_and_rules_win_over_git(
    repositories: dict[str, Path],
) -> None:
    plain = repositories["tmp"] / "plain"
    plain.mkdir()
    assert checkout_of(plain) is None
    lonely = repositories["tmp"] / "lonely"
    git("init", "-q", lonely)
    assert checkout_of(lonely) is None
    where = bridge_workspace("http://127.0.0.1:1/", plain)
    assert (where.checkout, where.store_url) == (None, "http://127.0.0.1:1/")
    rules = [parse_rule(f"{repositories['tmp']}/*/app=team-app")]
    assert checkout_of(repositories["alice"] / "src", rules) == Checkout(
        "team-app", str(repositories["alice"])
    )
    with pytest.raises(ConfigurationError):
        parse_rule("no-equals-sign")
    with pytest.raises(ConfigurationError):
        parse_rule("/x/*=bad//name")
    assert rules_from([], {"BRIDGE_STORE_WORKSPACE_RULES": "/a/*=one; /b=two"}) == [
        ("/a/*", "one"),
        ("/b", "two"),
    ]


def test_credentials_in_the_origin_never_leave_the_machine(
    repositories: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    alice = repositories["alice"]
    git("-C", alice, "remote", "set-url", "origin", "https://bob:ghp_TOKEN42@example.com/o/app")
    where = bridge_workspace("http://127.0.0.1:1/", alice)
    assert where.checkout == Checkout("example.com/o/app", str(alice))
    assert "TOKEN42" not in where.store_url
    assert "TOKEN42" not in repr(where)
    assert "TOKEN42" not in "".join(capfd.readouterr())


# -- through the server -------------------------------------------------------------------

TOKENS = {"alice": "alice-token-0001", "bob": "bob-token-0002", "eve": "eve-token-0003"}


def registry() -> TokenRegistry:
    tenants = {"alice": "app-team", "bob": "app-team", "eve": "other-team"}
    return TokenRegistry(
        [
            TokenEntry(name, token_digest(token), tenants[name], Scope.WRITE)
            for name, token in TOKENS.items()
        ]
    )


def call(base: str, checkout: Checkout | None, who: str, method: str, data: Any) -> Any:
    url = base + "/" if checkout is None else segment.store_url(base + "/", checkout)
    response = httpx.post(
        url.rstrip("/") + CALL_STORE_PATH,
        json={"substore": "agents", "method": method, "input": data},
        headers={"authorization": f"Bearer {TOKENS[who]}"},
        timeout=10,
    )
    body = response.json()
    if response.status_code != 200:
        raise ConnectError(Code(body["code"]), body["message"])
    return body.get("output")


def test_a_workspace_never_crosses_a_tenant_and_a_bad_segment_is_invalid_argument() -> None:
    config = ServerConfig(routes=Routes.single("memory://"), tokens=registry())
    with running(create_app(config)) as base:
        call(base, ALICE, "alice", "create", {"agent": agent("a1", ALICE.root)})
        listed = call(base, BOB, "bob", "list", {"filter": {"cwd": BOB.root}})
        assert [(a["agentId"], a["cwd"]) for a in listed["items"]] == [("a1", BOB.root)]
        assert call(base, BOB, "eve", "list", {"filter": {"cwd": BOB.root}}) == {"items": []}
        assert call(base, BOB, "eve", "get", {"agentId": "a1"}) is None
        call(base, BOB, "bob", "delete", {"filter": {"cwd": BOB.root}})
        assert call(base, ALICE, "alice", "get", {"agentId": "a1"}) is None
        for path in ("/w/!!", "/w/", "/w/" + "A" * 5000, "/w/bnVsbA"):
            response = httpx.post(
                base + path + CALL_STORE_PATH,
                json={"substore": "agents", "method": "list", "input": {}},
                headers={"authorization": f"Bearer {TOKENS['bob']}"},
            )
            assert response.status_code == 400, path
            assert response.json()["code"] == "invalid_argument"
        # Before the caller is known, a segment is not even read.
        unknown = httpx.post(base + "/w/!!" + CALL_STORE_PATH, json={})
        assert unknown.status_code == 401
        assert httpx.post(base + "/w/x/elsewhere", json={}).status_code == 404


def test_a_method_or_input_of_any_json_type_is_refused_through_a_workspace_url() -> None:
    """A list as the method raised TypeError in the translation (answered ``internal``,
    found by tests/test_fuzz.py): every such call is the contract's ``invalid_argument``,
    with a checkout and without."""
    config = ServerConfig(routes=Routes.single("memory://"), tokens=registry())
    with running(create_app(config)) as base:
        for url in (base + "/", segment.store_url(base + "/", BOB)):
            for method, data in (([], {}), ({}, {}), (1, {}), ("list", []), ("get", "x")):
                response = httpx.post(
                    url.rstrip("/") + CALL_STORE_PATH,
                    json={"substore": "agents", "method": method, "input": data},
                    headers={"authorization": f"Bearer {TOKENS['bob']}"},
                    timeout=10,
                )
                assert response.status_code == 400, (url, method, data, response.text)
                assert response.json()["code"] == "invalid_argument"


async def test_ten_thousand_agents_in_one_workspace_page_into_another_checkout() -> None:
    server = BridgeStoreServer(ServerConfig(routes=Routes.single("memory://"), auth_token="t"))
    alice = Principal(name="alice", tenant="default", scope=Scope.WRITE)
    bob = Principal(name="bob", tenant="default", scope=Scope.WRITE)
    count = 10_000
    async with _serving(server):
        for number in range(count):
            sub = "" if number % 2 else "/web"
            data = {"agent": agent(f"agent-{number:05}", ALICE.root + sub, updated=number)}
            await server.handle(alice, "agents", "create", data, ALICE)
        await server.handle(alice, "agents", "create", {"agent": agent("x", OTHER.root)}, OTHER)
        started = time.monotonic()
        seen: list[str] = []
        cursor = None
        while True:
            filter_: dict[str, Any] = {"cwd": BOB.root + "/web", "limit": 50}
            if cursor is not None:
                filter_["cursor"] = cursor
            page, _ = await server.handle(bob, "agents", "list", {"filter": filter_}, BOB)
            assert page is not None
            assert {item["cwd"] for item in page["items"]} <= {BOB.root + "/web"}
            seen += [item["agentId"] for item in page["items"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        elapsed = time.monotonic() - started
    assert len(seen) == len(set(seen)) == count // 2
    assert seen[0] == f"agent-{count - 2:05}"  # newest first, as the contract orders
    assert elapsed < 30, elapsed


class _serving:
    """The server's lifespan, without a listening socket."""

    def __init__(self, server: BridgeStoreServer) -> None:
        self._server = server
        self._lifespan: Any = None

    async def __aenter__(self) -> None:
        self._lifespan = self._server.lifespan(Starlette())
        await self._lifespan.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        await self._lifespan.__aexit__(*exc)


def test_no_access_line_names_a_checkout() -> None:
    path = "/w/" + segment.encode(ALICE) + CALL_STORE_PATH
    for logged, kept in ((path, False), (CALL_STORE_PATH, False), ("/healthz", True)):
        record = logging.LogRecord(
            "uvicorn.access", logging.INFO, "", 0, "%s %s %s", ("x", "POST", logged), None
        )
        assert SkipCallStoreAccess().filter(record) is kept
