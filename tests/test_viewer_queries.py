"""The viewer's queries on every backend: paging by the store's cursors, filters,
runs newest first, transcripts by offset, the search scan and the search seam."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.features import Candidates
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import AgentPosition
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import Routes, Stores, open_stores
from bridge_store.viewer import queries
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.search import (
    IndexedSearch,
    ScanSearch,
    SearchPage,
    search,
    search_index,
    searcher_for,
)

from .support.history import (
    ANSWER,
    ARCHIVED_AGENT,
    DOCS_AGENT,
    FAILED_RUN,
    FINISHED_RUN,
    LIVE_RUN,
    LOGIN_AGENT,
    PROMPT,
    USAGE,
    agent,
    history_calls,
)

BACKENDS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@dataclass
class History:
    stores: Stores
    reader: HistoryReader

    async def call(self, substore: str, method: str, data: Any) -> Any:
        output, _ = await call_store(
            self.stores, substore, method, data, principal=local_principal()
        )
        return output


@pytest.fixture(params=BACKENDS)
async def history(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[History]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue(f"make_{request.param}_url")()
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        for substore, method, data in history_calls():
            await call_store(opened.stores, substore, method, data, principal=local_principal())
        yield History(
            opened.stores, HistoryReader(in_process(lambda: opened.stores, local_principal()))
        )
    finally:
        await opened.close()


def ids(page: dict[str, Any]) -> list[str]:
    return [a["agentId"] for a in page["agents"]]


async def test_agents_newest_first_without_archived_or_secrets(history: History) -> None:
    page = await queries.agents_page(history.reader, queries.AgentFilters())
    assert ids(page) == [LOGIN_AGENT, DOCS_AGENT]
    assert page["next"] is None
    assert all("sdkMetadata" not in a for a in page["agents"])
    shown = await queries.agents_page(history.reader, queries.AgentFilters(archived=True))
    assert ids(shown) == [LOGIN_AGENT, DOCS_AGENT, ARCHIVED_AGENT]
    only = await queries.agents_page(history.reader, queries.AgentFilters(status="archived"))
    assert ids(only) == [ARCHIVED_AGENT]


async def test_agent_filters_apply_across_store_pages(history: History) -> None:
    for n in range(7):
        doc = agent(f"agent-extra-{n}", f"extra {n}", "/src/extra", "idle", 2_000_000_000_000 + n)
        await history.call("agents", "create", {"agent": doc})
    by_cwd = queries.AgentFilters(cwd="/src/app", archived=True)
    assert ids(await queries.agents_page(history.reader, by_cwd)) == [LOGIN_AGENT, ARCHIVED_AGENT]
    # Paging with the store's cursor: every agent exactly once, newest first.
    seen: list[str] = []
    cursor = None
    while True:
        page = await queries.agents_page(
            history.reader, queries.AgentFilters(), cursor=cursor, limit=3
        )
        seen += ids(page)
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == [f"agent-extra-{n}" for n in reversed(range(7))] + [LOGIN_AGENT, DOCS_AGENT]
    # A filter the store cannot apply reads on through whole store pages until it fills one.
    named = await queries.agents_page(history.reader, queries.AgentFilters(name="LOGIN"), limit=1)
    assert ids(named) == [LOGIN_AGENT]
    # Pages that end inside a store page go on right after their last row.
    pages = []
    cursor = None
    while True:
        page = await queries.agents_page(
            history.reader, queries.AgentFilters(name="extra"), cursor=cursor, limit=3
        )
        pages.append([a["name"] for a in page["agents"]])
        cursor = page["next"]
        if cursor is None:
            break
    assert pages[:3] == [
        ["extra 6", "extra 5", "extra 4"],
        ["extra 3", "extra 2", "extra 1"],
        ["extra 0"],
    ]
    assert all(page == [] for page in pages[3:])
    running = await queries.agents_page(history.reader, queries.AgentFilters(status="running"))
    assert ids(running) == [DOCS_AGENT]


async def test_agent_page_lists_runs_newest_first_with_duration_and_tokens(
    history: History,
) -> None:
    data = await queries.agent_page(history.reader, LOGIN_AGENT)
    assert data["agent"]["name"] == "fix login"
    assert "sdkMetadata" not in data["agent"]
    assert data["modelId"] == "composer-2"
    assert [r["runId"] for r in data["runs"]] == [FAILED_RUN, FINISHED_RUN]
    failed, finished = data["runs"]
    assert (finished["durationMs"], finished["tokens"]) == (83_500, USAGE)
    assert (failed["durationMs"], failed["error"]) == (
        900,
        {"message": "[permission_denied] HTTP 403"},
    )
    with pytest.raises(ConnectError) as missing:
        await queries.agent_page(history.reader, "agent-nobody")
    assert missing.value.code == Code.NOT_FOUND


async def test_transcript_pages_by_offset_and_follows_a_live_run(history: History) -> None:
    first = await queries.transcript_page(history.reader, LOGIN_AGENT, FINISHED_RUN, limit=5)
    assert [b["kind"] for b in first["blocks"]] == ["request", "status", "user", "thinking"]
    assert (first["next"], first["more"], first["live"]) == ("5", True, False)
    assert first["usage"] == USAGE
    rest = await queries.transcript_page(
        history.reader, LOGIN_AGENT, FINISHED_RUN, after=first["next"], limit=1000
    )
    assert rest["more"] is False
    last = rest["blocks"][-1]
    # Each block also carries when it happened: its first event's time, as stored.
    assert isinstance(last.pop("at"), int)
    assert last == {
        "kind": "status",
        "key": "status-17",
        "seqs": [17],
        "status": "FINISHED",
        "message": "",
    }
    assert ANSWER in [b.get("text") for b in rest["blocks"]]
    live = await queries.transcript_page(history.reader, DOCS_AGENT, LIVE_RUN)
    assert (live["live"], live["next"], live["more"]) == (True, "3", False)
    # Polling from the last offset returns nothing new, and the same offset to poll from.
    again = await queries.transcript_page(history.reader, DOCS_AGENT, LIVE_RUN, after="3")
    assert (again["blocks"], again["next"]) == ([], "3")


async def test_find_run_by_id_alone(history: History) -> None:
    found = await queries.find_run(history.reader, FAILED_RUN)
    assert (found["agentId"], found["status"]) == (LOGIN_AGENT, "error")
    with pytest.raises(ConnectError) as missing:
        await queries.find_run(history.reader, "run-nothing")
    assert missing.value.code == Code.NOT_FOUND


async def test_scan_search_finds_names_prompts_and_answers(history: History) -> None:
    searcher = ScanSearch(history.reader)
    page = await search(searcher, "REDIRECT login", cursor=None)
    assert page.method == "scan"
    found = [(hit["kind"], hit.get("run", {}).get("runId")) for hit in page.hits]
    # The prompt, and the tool call that read routes/login.py and whose test of the
    # redirect failed.
    assert found == [("user", FINISHED_RUN), ("tool_call", FINISHED_RUN)]
    assert page.hits[0]["text"] == PROMPT
    by_name = await search(searcher, "docs", cursor=None)
    assert [(hit["kind"], hit["agent"]["agentId"]) for hit in by_name.hits] == [
        ("agent", DOCS_AGENT)
    ]
    answer = await search(searcher, "next parameter", cursor=None)
    assert [hit["kind"] for hit in answer.hits] == ["assistant"]
    # Words match where words start; tool calls are searched, thinking is not; empty
    # queries search nothing.
    assert [hit["kind"] for hit in (await search(searcher, "param", cursor=None)).hits] == [
        "assistant"
    ]
    assert (await search(searcher, "arameter", cursor=None)).hits == []
    tool = (await search(searcher, "routes/login.py", cursor=None)).hits
    assert [(hit["kind"], hit["key"]) for hit in tool] == [("tool_call", "call-call-read")]
    assert (await search(searcher, "router first", cursor=None)).hits == []  # thinking
    assert (await search(searcher, "   ", cursor=None)).method == "none"


async def test_scan_search_goes_a_slice_of_agents_at_a_time(history: History) -> None:
    searcher = ScanSearch(history.reader, agents_per_page=1)
    pages: list[SearchPage] = []
    cursor = None
    while True:
        page = await search(searcher, "redirect", cursor=cursor)
        pages.append(page)
        cursor = page.next
        if cursor is None:
            break
    # The archived agent is searched too: search covers the whole history.
    assert len(pages) == 3
    # The prompt, the failed test's tool call (test_redirect_...) and the answer.
    kinds = [[hit["kind"] for hit in page.hits] for page in pages]
    assert kinds == [["user", "tool_call", "assistant"], [], []]


class _EveryAgentIndex:
    """An index that names every agent with every run: the most an index may name."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self.asked: list[tuple[str, list[str]]] = []

    def indexes(self, agents: object, runs: object) -> bool:
        return agents is self.stores.agents and runs is self.stores.runs

    async def search_candidates(
        self, tenant: str, terms: Any, *, after: AgentPosition | None, limit: int
    ) -> Candidates:
        self.asked.append((tenant, list(terms)))
        agents = await self.stores.agents.list(tenant, cwd=None, after=after, limit=limit)
        found: Candidates = []
        for each in agents:
            runs = await self.stores.runs.list(
                tenant,
                agent_ids=[each["agentId"]],
                run_ids=None,
                after=None,
                limit=1000,
            )
            position = AgentPosition(each["updatedAt"], each["agentId"])
            found.append((position, [run["runId"] for run in runs]))
        return found


async def test_an_index_narrows_and_the_viewer_checks_what_it_names(history: History) -> None:
    index = _EveryAgentIndex(history.stores)
    agents, runs, checkpoints = index.stores.agents, index.stores.runs, index.stores.checkpoints
    assert search_index(Stores(agents, runs, index, checkpoints)) is index  # type: ignore[arg-type]
    # An index of other agents or runs (another store's) does not answer for these.
    elsewhere: Any = object()
    assert search_index(Stores(elsewhere, runs, index, checkpoints)) is None  # type: ignore[arg-type]
    assert search_index(Stores(agents, elsewhere, index, checkpoints)) is None  # type: ignore[arg-type]
    searcher = searcher_for(index, "default", history.reader)
    assert isinstance(searcher, IndexedSearch)
    scan = ScanSearch(history.reader)
    for query in ("Login Redirect", "docs", "next param", "routes/login.py", "café redirect"):
        indexed = await search(searcher, query, cursor=None)
        scanned = await search(scan, query, cursor=None)
        assert indexed.hits == scanned.hits, query
        assert indexed.method == "index"
    # Only what the index can look up is asked: the starts of ASCII runs that start a word.
    assert index.asked[0] == ("default", ["log", "red"])
    assert index.asked[-1] == ("default", ["caf", "red"])
    # Words it cannot look up at all are scanned.
    assert (await search(searcher, "ÉCLAIR", cursor=None)).method == "scan"
