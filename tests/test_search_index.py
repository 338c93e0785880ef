"""The SQL full-text index (revision 0003) behind the viewer's search, on SQLite and
Postgres: it is used, finds exactly what the scan finds, stays current as agents are
renamed and history is deleted, answers for one tenant only, and comes and goes with
its revision."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer import search as viewer_search
from bridge_store.viewer.reader import HistoryReader, in_process
from bridge_store.viewer.search import (
    IndexedSearch,
    ScanSearch,
    SearchPage,
    search,
    search_index,
    searcher_for,
)
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.migrate import downgrade, upgrade
from bridge_store_sql.search import SearchableRunEvents, candidates_statement
from bridge_store_sql.statements import Session

from .support.history import (
    DOCS_AGENT,
    FINISHED_RUN,
    LOGIN_AGENT,
    agent,
    history_calls,
    message,
    run,
    text,
)
from .test_viewer_tenants import team_b_calls

#: Queries whose hits the index must find as the scan does: words at word starts,
#: several words, punctuation inside a word, prefixes, names, nothing at all.
QUERIES = [
    "redirect",
    "REDIRECT login",
    "redir",
    "next param",
    "docs",
    "fix",
    "login.py",
    "routes/login.py",
    "café",
    "bare string",
    "zebra",
    "byte zebra",
    "zanzibar",
    "zanzibar gate",
    "quokka",
    "edirect",
    "nothing-like-this",
    "the",
    # Tool calls (names, arguments, results) and statuses (errors).
    "read_file",
    "read",
    "pytest tests",
    "test_redirect_keeps_next",
    "1 failed",
    "permission_denied 403",
    "retries true",
    "unnamed",
    "tool",
    "kaput",
    "grep",
]


def extra_calls() -> list[tuple[str, str, dict[str, Any]]]:
    """Text the fixtures lack: a bare string prompt, punctuation, a non-ASCII word."""
    bare = {"type": "user", "message": {"role": "user", "content": "a bare string prompt"}}
    cafe = {
        "type": "assistant",
        "message": {"role": "assistant", "content": [text("Edited routes/login.py at the café")]},
    }
    # JSON carries a NUL as \u0000, which Postgres's jsonb refuses: the index reads it
    # as a space, and the write must not fail for the index's sake.
    nul = {"type": "assistant", "message": {"content": [text("a nul\x00byte zebra")]}}
    # A streamed answer that splits a word between two deltas, as models do.
    split = [
        {"type": "assistant", "message": {"content": [text(piece)]}}
        for piece in ("Through the zanzi", "bar gate")
    ]
    # Arguments and results of every JSON type, a call no event names, a status whose
    # message is an object.
    calls: list[dict[str, Any]] = [
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": "grep",
            "status": "running",
            "args": {"pattern": "retries", "max": 3, "fixed": True, "in": ["a.py", None]},
        },
        {"type": "tool_call", "call_id": "c1", "status": "completed", "result": 17},
        {"type": "tool_call", "call_id": "c2", "status": "error", "result": "unnamed kaput"},
        {"type": "status", "status": "ERROR", "message": {"code": "kaput", "detail": 2}},
    ]
    return [
        ("agents", "create", {"agent": agent("agent-extra", "café notes", "/x", "idle", 7)}),
        ("runs", "create", {"run": run("agent-extra", "run-tools", 4, "error")}),
        *(("runEvents", "append", message("agent-extra", "run-tools", e)) for e in calls),
        ("runs", "create", {"run": run("agent-extra", "run-extra", 1, "finished")}),
        ("runEvents", "append", message("agent-extra", "run-extra", bare)),
        ("runEvents", "append", message("agent-extra", "run-extra", cafe)),
        ("runs", "create", {"run": run("agent-extra", "run-nul", 2, "finished")}),
        ("runEvents", "append", message("agent-extra", "run-nul", nul)),
        ("runs", "create", {"run": run("agent-extra", "run-split", 3, "finished")}),
        *(("runEvents", "append", message("agent-extra", "run-split", e)) for e in split),
    ]


@dataclass
class Store:
    opened: OpenStores

    @property
    def backend(self) -> SqlBackend:
        backend = self.opened.backends[0]
        assert isinstance(backend, SqlBackend)
        return backend

    def reader(self, tenant: str) -> HistoryReader:
        return HistoryReader(in_process(lambda: self.opened.stores, local_principal(tenant)))

    def indexed(self, tenant: str, agents_per_page: int = 20) -> IndexedSearch:
        index = search_index(self.opened.stores)
        assert isinstance(index, SearchableRunEvents)
        return IndexedSearch(index, tenant, self.reader(tenant), agents_per_page)

    def scan(self, tenant: str, agents_per_page: int = 20) -> ScanSearch:
        return ScanSearch(self.reader(tenant), agents_per_page)

    async def call(self, tenant: str, substore: str, method: str, data: Any) -> Any:
        principal = local_principal(tenant)
        output, _ = await call_store(
            self.opened.stores, substore, method, data, principal=principal
        )
        return output


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        # The filler of test_the_database_uses_the_index (25,000 indexed rows in one
        # write) is set-up, not a bridge's call: on a loaded machine it outlasted the
        # 5 s backend timeout that bounds a whole call.
        url = request.getfixturevalue("make_postgres_url")() + "?command_timeout=120"
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        held = Store(opened)
        for substore, method, data in history_calls() + extra_calls():
            await held.call("default", substore, method, data)
        for substore, method, data in team_b_calls():
            await held.call("team-b", substore, method, data)
        yield held
    finally:
        await opened.close()


async def every_page(searcher: Any, query: str) -> tuple[list[Any], list[SearchPage]]:
    pages: list[SearchPage] = []
    cursor = None
    while True:
        page = await search(searcher, query, cursor=cursor)
        pages.append(page)
        cursor = page.next
        if cursor is None:
            return [hit for page in pages for hit in page.hits], pages


async def assert_same_hits(store: Store, tenant: str) -> None:
    for query in QUERIES:
        indexed, pages = await every_page(store.indexed(tenant), query)
        scanned, _ = await every_page(store.scan(tenant), query)
        assert indexed == scanned, query
        assert {page.method for page in pages} == {"index"}, query


@pytest.mark.parametrize("few_runs", [0, 2])
async def test_the_index_finds_what_the_scan_finds_for_each_tenant(
    store: Store, few_runs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs read one by one, or with one list of the agent's runs.
    monkeypatch.setattr(viewer_search, "FEW_RUNS", few_runs)
    await assert_same_hits(store, "default")
    await assert_same_hits(store, "team-b")
    split, _ = await every_page(store.indexed("default"), "zanzibar gate")
    assert [hit["text"] for hit in split] == ["Through the zanzibar gate"]
    hits, _ = await every_page(store.indexed("default"), "routes/login.py")
    assert [(hit["kind"], hit["agent"]["agentId"]) for hit in hits] == [
        ("tool_call", "agent-login"),
        ("assistant", "agent-extra"),
    ]
    # Tool names, arguments, results and errors are found too.
    tools, _ = await every_page(store.indexed("default"), "retries true")
    assert [(hit["kind"], hit["key"]) for hit in tools] == [("tool_call", "call-c1")]
    failed, _ = await every_page(store.indexed("default"), "test_redirect_keeps_next")
    assert [hit["text"] for hit in failed] == [
        '…"command":"pytest -q tests/test_login.py"} 1 failed: test_redirect_keeps_next'
    ]
    errors, _ = await every_page(store.indexed("default"), "permission_denied")
    assert [hit["kind"] for hit in errors] == ["status"]
    # "tool" is only how an unnamed call is shown: no event says it.
    assert (await every_page(store.indexed("default"), "unnamed"))[0][0]["kind"] == "tool_call"
    # The other tenant's words are not found, and its agents are not even candidates.
    assert (await search(store.indexed("default"), "quokka", cursor=None)).hits == []
    index = search_index(store.opened.stores)
    assert isinstance(index, SearchableRunEvents)
    assert await index.search_candidates("default", ["quokka"], after=None, limit=10) == []
    beta = await index.search_candidates("team-b", ["quokka"], after=None, limit=10)
    assert [(p.agent_id, runs) for p, runs in beta] == [
        (LOGIN_AGENT, [FINISHED_RUN]),
        ("agent-beta", ["run-beta"]),
    ]


async def test_the_index_pages_agents_as_the_scan_does(store: Store) -> None:
    for query in ("redirect", "fix", "the"):
        indexed, pages = await every_page(store.indexed("default", agents_per_page=1), query)
        scanned, _ = await every_page(store.scan("default", agents_per_page=1), query)
        assert indexed == scanned
        # The index reads matching agents only: one page each, and a last one.
        assert len(pages) <= len({hit["agent"]["agentId"] for hit in indexed}) + 1


async def test_the_index_follows_renames_and_deletions(store: Store) -> None:
    login = await store.call("default", "agents", "get", {"agentId": LOGIN_AGENT})
    renamed = {**login, "name": "wombat tracker", "updatedAt": login["updatedAt"] + 1}
    await store.call("default", "agents", "update", {"agent": renamed})
    assert [
        h["kind"] for h in (await search(store.indexed("default"), "wombat", cursor=None)).hits
    ] == ["agent"]
    old_name = await search(store.indexed("default"), "fix login", cursor=None)
    assert [hit["kind"] for hit in old_name.hits] == ["user"]  # the prompt, not the name
    await assert_same_hits(store, "default")
    await store.call("default", "runEvents", "delete", {"filter": {"runIds": [FINISHED_RUN]}})
    assert (await search(store.indexed("default"), "redirect", cursor=None)).hits == []
    await store.call("default", "agents", "delete", {"filter": {"agentIds": [DOCS_AGENT]}})
    assert (await search(store.indexed("default"), "docs", cursor=None)).hits == []
    await assert_same_hits(store, "default")
    # Team B's history, under the same ids, is untouched.
    assert len((await search(store.indexed("team-b"), "redirect", cursor=None)).hits) == 1
    await assert_same_hits(store, "team-b")


#: Postgres: enough other history that reading a tenant's rows costs more than the index.
_FILLER = [
    """INSERT INTO run_events (tenant, run_id, seq, doc)
    SELECT 'default', 'filler-' || (g / 100), g, '{"payload": {"type": "sdk_message",
    "message": {"type": "assistant", "message": {"content": [{"type": "text",
    "text": "filler words ' || g || '"}]}}}}' FROM generate_series(1, 20000) AS g""",
    """INSERT INTO agents (tenant, agent_id, cwd, updated_at, doc)
    SELECT 'default', 'filler-' || g, '/f', g, '{"name": "filler ' || g || '"}'
    FROM generate_series(1, 5000) AS g""",
    "ANALYZE run_events",
    "ANALYZE agents",
]


async def test_the_database_uses_the_index(store: Store) -> None:
    dialect = store.backend.db.dialect
    statement = candidates_statement(dialect, "default", ["redirect", "log"], after=None, limit=20)
    if dialect == "postgresql":

        def fill(session: Session) -> None:
            for filler in _FILLER:
                session.execute(sa.text(filler))

        await store.backend.db.write(fill, what="test", atomic=True, retry=False)

    explain = "EXPLAIN QUERY PLAN " if dialect == "sqlite" else "EXPLAIN "
    plan = sa.text(explain + statement.text).bindparams(*statement._bindparams.values())

    def read_plan(session: Session) -> str:
        rows = session.execute(plan.columns(sa.column("plan")))
        return "\n".join(str(row[-1]) for row in rows)

    shown = await store.backend.db.read(read_plan, what="test")
    if dialect == "sqlite":
        assert "SCAN search_events VIRTUAL TABLE INDEX" in shown, shown
        assert "SCAN search_agents VIRTUAL TABLE INDEX" in shown, shown
    else:
        assert "Bitmap Index Scan on ix_run_events_search" in shown, shown
        assert "Bitmap Index Scan on ix_agents_search" in shown, shown


async def test_downgrade_removes_the_index_and_upgrade_rebuilds_it(store: Store) -> None:
    before, _ = await every_page(store.indexed("default"), "redirect")
    db = store.backend.db
    await db.migrate(lambda conn: downgrade(conn, "0002"), what="test")
    assert await store.backend.schema_revision() == "0002"

    def leftovers(session: Session) -> list[str]:
        if dialect == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE name LIKE 'search%'"
        else:
            query = (
                "SELECT indexname FROM pg_indexes WHERE indexname LIKE '%search%' UNION ALL "
                "SELECT proname FROM pg_proc WHERE proname LIKE 'bridge_store_search%'"
            )
        return [row[0] for row in session.execute(sa.text(query))]

    dialect = db.dialect
    assert await db.read(leftovers, what="test") == []
    # Written while there is no index: the upgrade indexes it with the rest.
    wombat = {"type": "user", "message": {"role": "user", "content": [text("wombat burrow")]}}
    await store.call("default", "runEvents", "append", message("agent-extra", "run-extra", wombat))
    await db.migrate(lambda conn: upgrade(conn), what="test")
    after, _ = await every_page(store.indexed("default"), "redirect")
    assert after == before
    assert [
        h["kind"] for h in (await search(store.indexed("default"), "wombat", cursor=None)).hits
    ] == ["user"]
    await assert_same_hits(store, "default")


async def test_only_sql_stores_over_one_database_get_the_index(tmp_path: Path) -> None:
    one = f"sqlite:///{tmp_path / 'one.db'}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    split = Routes(agents=other, runs=one, run_events=one, checkpoints=one)

    async def searcher(routes: Routes) -> Any:
        opened = await open_stores(get_plugin_manager(), routes, migrate=True)
        try:
            reader = HistoryReader(in_process(lambda: opened.stores, local_principal()))
            return searcher_for(search_index(opened.stores), "default", reader)
        finally:
            await opened.close()

    assert isinstance(await searcher(Routes.single(one)), IndexedSearch)
    # Agents in another database than the events: the index cannot answer for them.
    assert isinstance(await searcher(split), ScanSearch)


async def test_a_store_not_yet_upgraded_is_scanned(tmp_path: Path) -> None:
    """``bridge-store ui`` and the CLI read without migrating: a store at 0002 is
    searched by a scan, not through an index it does not have."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    (tmp_path / "old.db").touch(mode=0o600)  # a start without migration creates none
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=False)
    backend = opened.backends[0]
    assert isinstance(backend, SqlBackend)
    await backend.db.migrate(lambda conn: upgrade(conn, "0002"), what="test")
    await opened.close()
    for migrate, indexed in ((False, False), (True, True)):
        opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=migrate)
        try:
            held = Store(opened)
            for substore, method, data in extra_calls() if migrate else []:
                await held.call("default", substore, method, data)
            reader = held.reader("default")
            searcher = searcher_for(search_index(opened.stores), "default", reader)
            assert isinstance(searcher, IndexedSearch) is indexed
            page = await search(searcher, "café", cursor=None)
            assert page.method == ("index" if indexed else "scan")
        finally:
            await opened.close()
