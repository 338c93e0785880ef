"""A name of a megabyte, which CallStore accepts, is shown cut in every page that lists
it or heads with it: fifty agents of such a name made a 50 MB agents list, and each
run of one repeated it in the runs list and the search hits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.templating import LABEL_CHARS, label
from testkit.inprocess import running

from .support.history import agent, message, run, text

TOKEN = "long-names-test-token-0123"
AGENTS = 5
#: A megabyte of name: words, so that whitespace folding leaves it long.
LONG_NAME = "findme " + "word " * 200_000


def test_a_label_is_one_line_cut_to_its_bound() -> None:
    assert label("a\nb\t c") == "a b c"
    assert len(label(LONG_NAME)) == LABEL_CHARS
    assert label(LONG_NAME).endswith("…")
    assert label("x" * LABEL_CHARS) == "x" * LABEL_CHARS


def store_call(url: str, substore: str, method: str, data: object) -> None:
    response = httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text


@pytest.fixture(params=["sqlite", "memory"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    store = f"sqlite:///{tmp_path / 'names.db'}" if request.param == "sqlite" else "memory://"
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    now = int(time.time() * 1000)  # within the overview's last seven days
    with running(app, access_log=False) as url:
        for n in range(AGENTS):
            store_call(
                url, "agents", "create", {"agent": agent(f"a-{n}", LONG_NAME, "/w", "idle", now)}
            )
            store_call(
                url,
                "runs",
                "create",
                {"run": run(f"a-{n}", f"r-{n}", 1, "finished", startedAt=now)},
            )
            body = {"type": "user", "message": {"content": [text("findme please")]}}
            store_call(url, "runEvents", "append", message(f"a-{n}", f"r-{n}", body))
        yield url


def test_every_page_cuts_a_megabyte_name(server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    pages = ["/ui/", "/ui/runs", "/ui/overview", "/ui/search?q=findme"]
    pages += ["/ui/agent?id=a-0", "/ui/run?agent=a-0&id=r-0"]
    with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, page
            # Five agents' megabyte names, had any been shown whole, would be 5 MB.
            assert len(response.content) < 200_000, (page, len(response.content))
            assert "findme word word" in response.text, page
