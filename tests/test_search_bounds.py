"""Search pages are bounded in hits and bytes, and a cursor goes on from anywhere.

One agent with hundreds of matching runs and a large document used to come back as
one page holding every hit, each with the whole agent document: 2,000 hits of an
agent with a 100 KiB field were a 205 MB answer. Now a page holds at most
``HITS_PER_PAGE`` hits and ``MAX_PAGE_BYTES`` of them, each naming its agent by id and
a cut name, and the cursor goes on inside an agent's runs; following it finds every
hit once, in order, with the index (SQLite, Postgres) and with the scan (memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.search_pages import HITS_PER_PAGE, MAX_PAGE_BYTES, NAME_CHARS
from testkit.inprocess import running

from .support.history import T0, agent, message, run, text

TOKEN = "search-bounds-token-01"
RUNS = 120
BIG = 100 * 1024
#: Each run: two matching prompts and a matching tool call (three hits, the most a run
#: gives), and one answer that does not match.
PER_RUN = 3


def calls() -> list[tuple[str, str, dict[str, object]]]:
    big_name = "wombat " + "n" * BIG
    found: list[tuple[str, str, dict[str, object]]] = [
        (
            "agents",
            "create",
            {"agent": {**agent("big", big_name, "/w", "idle", T0), "notes": "x" * BIG}},
        ),
        ("agents", "create", {"agent": agent("small", "wombat two", "/w", "idle", T0 - 1)}),
        ("runs", "create", {"run": run("small", "s-1", 1, "finished")}),
        (
            "runEvents",
            "append",
            message("small", "s-1", {"type": "user", "message": {"content": [text("wombat")]}}),
        ),
    ]
    for turn in range(1, RUNS + 1):
        run_id = f"r-{turn:04}"
        found.append(("runs", "create", {"run": run("big", run_id, turn, "finished")}))
        for body in (
            {"type": "user", "message": {"content": [text(f"wombat one {turn}")]}},
            {"type": "assistant", "message": {"content": [text("nothing here")]}},
            {"type": "user", "message": {"content": [text(f"wombat again {turn} " + "y" * BIG)]}},
            {"type": "tool_call", "call_id": "c" * 5000, "name": "wombat", "status": "done"},
        ):
            found.append(("runEvents", "append", message("big", run_id, body)))
    return found


@pytest.fixture(
    scope="module",
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "memory":
        store = "memory://"
    elif request.param == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('search') / 'store.db'}"
    else:
        store = request.getfixturevalue("make_postgres_url")()
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    with running(app) as url, httpx.Client(base_url=url) as client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for substore, method, data in calls():
            body = {"substore": substore, "method": method, "input": data}
            answer = client.post(CALL_STORE_PATH, json=body, headers=headers)
            assert answer.status_code == 200, answer.text
        yield url


def every_page(client: httpx.Client, shape: str) -> list[httpx.Response]:
    pages: list[httpx.Response] = []
    cursor = ""
    while True:
        page = client.get("/ui/search", params={"q": "wombat", "cursor": cursor, "format": "json"})
        assert page.status_code == 200, page.text[:300]
        pages.append(page)
        if shape == "html":
            html = client.get("/ui/search", params={"q": "wombat", "cursor": cursor})
            assert html.status_code == 200
            assert len(html.content) < MAX_PAGE_BYTES + 64 * 1024
            if page.json()["next"]:
                assert "More results" in html.text
        cursor = page.json()["next"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursor does not go on"


@pytest.mark.parametrize("shape", ["json", "html"])
def test_pages_are_bounded_and_the_cursor_finds_every_hit_once(server: str, shape: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers, timeout=60) as client:
        pages = every_page(client, shape)
    hits = [hit for page in pages for hit in page.json()["hits"]]
    for page in pages:
        assert len(page.json()["hits"]) <= HITS_PER_PAGE
        assert len(page.content) <= MAX_PAGE_BYTES
    # The agent's name, then each run's three hits, turn by turn; then the other agent.
    expected: list[tuple[str, str, str | None]] = [("agent", "big", None)]
    for turn in range(1, RUNS + 1):
        expected += [(kind, "big", f"r-{turn:04}") for kind in ("user", "user", "tool_call")]
    expected += [("agent", "small", None), ("user", "small", "s-1")]
    found = [(h["kind"], h["agent"]["agentId"], (h.get("run") or {}).get("runId")) for h in hits]
    assert found == expected
    assert len(pages) >= len(expected) // HITS_PER_PAGE
    for hit in hits:
        # The agent by id and a cut name, not its document.
        assert set(hit["agent"]) == {"agentId", "name"}
        assert len(hit["agent"]["name"]) <= NAME_CHARS + 1
        assert len(hit["text"]) <= 200
    tool = next(hit for hit in hits if hit["kind"] == "tool_call")
    assert tool["key"] is None  # a 5,000-character call id: linked by seq only


def test_an_old_agents_cursor_still_goes_on(server: str) -> None:
    # Cursors from before (the agents list's own) go on after that agent.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers, timeout=60) as client:
        agents = client.get("/ui/?format=json&limit=1").json()
        page = client.get("/ui/search", params={"q": "wombat", "cursor": agents["next"]})
        assert page.status_code == 200
        data = client.get(
            "/ui/search", params={"q": "wombat", "cursor": agents["next"], "format": "json"}
        ).json()
        assert [hit["agent"]["agentId"] for hit in data["hits"]] == ["small", "small"]


def test_a_forged_cursor_is_refused(server: str, tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers, timeout=60) as client:
        for cursor in ("x", "c2VhcmNo", "c2VhcmNoAAAAAA"):
            page = client.get(
                "/ui/search", params={"q": "wombat", "cursor": cursor, "format": "json"}
            )
            assert page.status_code == 400, (cursor, page.text)
