"""Every reader against everything the writer accepts.

Hypothesis writes histories CallStore accepts at the contract's edges (times from
-2^53 to 2^53, microseconds by mistake and past the calendar; C0 and C1 controls, DEL,
bidi overrides, lone surrogates, HTML, Rich markup and Markdown in every text; 1 MiB
fields; optional fields missing, null or odd; fields the contract does not name;
every SDK message type with any JSON in its fields), through CallStore, then reads
them back through everything that shows history: every viewer page and its JSON twin
(and the transcript's fragments), the exports, search, ``/metrics``, the read
commands in every output mode (a Rich terminal, a pipe, ``--json``, ``--markdown``,
through the server and from the store directly) and the archive export.

What must hold, whatever was written: nothing answers 5xx or prints a traceback; no
control character a terminal acts on (C0 but newline and tab, DEL, C1, bidi
controls) or cannot be sent (a lone surrogate) reaches a command's output; ``--json``
is valid JSON; no page exceeds its bound (a search page its hits and bytes, a list
its limit); and every list walked a row at a time with its cursor shows each stored
item once.

Examples are derandomized, so CI runs the same cases every time, a few dozen per
backend; ``--hypothesis-profile=fuzz-long`` draws new ones, :data:`LONG_RUN_FACTOR`
times as many (docs/development.md).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.cli import main
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.queries import DEFAULT_EVENTS_PAGE
from bridge_store.viewer.search_pages import HITS_PER_PAGE, MAX_PAGE_BYTES
from testkit.inprocess import running

from .support.hostile import (
    agent_documents,
    event_inputs,
    hostile_texts,
    keys,
    run_documents,
)

TOKEN = "readers-fuzz-token-0123"
FUZZ = settings.get_profile("fuzz")
#: With --hypothesis-profile=fuzz-long: random examples, this many times as many.
LONG_RUN_FACTOR = 20
#: Examples per backend: each writes a history and reads it some hundred ways.
EXAMPLES = {"memory": 30, "sqlite": 20, "postgres": 12}
#: What must not reach a terminal: C0 but newline and tab, DEL, C1, the bidi
#: embeddings, overrides and isolates, and (lone) surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: Rich's own colours and styles, the only escape sequences a rendered table may hold.
RICH_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def utf8_safe(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


# -- histories ---------------------------------------------------------------------------


@dataclass
class History:
    """What one example writes: agents, runs (some of agents never written) and the
    events of each run, as CallStore inputs in the order they are sent."""

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    query: str = "wombat"
    source: str = "remote"
    archive: bool = False
    #: Which of :data:`COMMANDS` read it.
    commands: list[int] = field(default_factory=list)


@st.composite
def histories(draw: st.DrawFn) -> History:
    ids = draw(st.lists(keys, min_size=3, max_size=6, unique=True))
    agent_ids, run_ids = ids[:2], ids[2:]
    history = History()
    for agent_id in agent_ids[: draw(st.integers(1, 2))]:
        doc = draw(agent_documents(agent_id))
        history.calls.append(("agents", "create", {"agent": doc}))
    for run_id in run_ids:
        agent_id = draw(st.sampled_from(agent_ids))
        doc = draw(run_documents(agent_id, run_id))
        history.calls.append(("runs", "create", {"run": doc}))
        for _ in range(draw(st.integers(0, 4))):
            history.calls.append(("runEvents", "append", draw(event_inputs(run_id))))
    # A query is part of an address: it holds no lone surrogate (a NUL is refused).
    history.query = draw(
        st.one_of(st.just("wombat"), hostile_texts).filter(lambda text: text == utf8_safe(text))
    )
    history.source = draw(st.sampled_from(["remote", "direct"]))
    history.archive = draw(st.integers(0, 3)) == 0
    history.commands = draw(
        st.lists(
            st.integers(0, len(COMMANDS) - 1),
            min_size=COMMANDS_PER_EXAMPLE,
            max_size=COMMANDS_PER_EXAMPLE,
            unique=True,
        )
    )
    return history


# -- the server ---------------------------------------------------------------------------


@dataclass
class Reading:
    backend: str
    url: str
    store: str
    remote: list[str]
    client: httpx.Client

    def call(self, substore: str, method: str, data: dict[str, Any]) -> httpx.Response:
        # As JSON text of our own (ensure_ascii): a lone surrogate travels escaped.
        body = json.dumps({"substore": substore, "method": method, "input": data})
        return self.client.post(
            CALL_STORE_PATH, content=body, headers={"Content-Type": "application/json"}
        )

    def clear(self) -> None:
        for substore in ("runEvents", "runs", "agents"):
            answer = self.call(substore, "delete", {"filter": {}})
            assert answer.status_code == 200, answer.text


BACKENDS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="module", params=BACKENDS)
def reading(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Reading]:
    folder = tmp_path_factory.mktemp("readers")
    if request.param == "memory":
        store = "memory://"
    elif request.param == "sqlite":
        store = f"sqlite:///{folder / 'store.db'}"
    else:
        store = request.getfixturevalue("make_postgres_url")()
    token_file = folder / "token"
    token_file.write_text(TOKEN)
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    # No access log: what the commands print to stderr is theirs alone (a log handler
    # an earlier test left on a closed capture would print its own error there).
    with (
        running(app, access_log=False) as url,
        httpx.Client(base_url=url, headers=headers, timeout=120) as client,
    ):
        remote = ["--store-callback-url", url, "--store-auth-token-file", str(token_file)]
        yield Reading(request.param, url, store, remote, client)


# -- what must hold --------------------------------------------------------------------


def answered(response: httpx.Response, what: str) -> None:
    """Not the server's failure: no 5xx, no traceback."""
    assert response.status_code < 500, (what, response.status_code, response.text[-500:])
    assert "Traceback" not in response.text, what


def json_of(reading: Reading, path: str, **params: str) -> Any:
    response = reading.client.get(path, params={**params, "format": "json"})
    answered(response, f"{path} {params}")
    return response.json() if response.status_code == 200 else None


def walk(
    reading: Reading, path: str, rows: str, key: Any, *, on: str = "cursor", **params: str
) -> list[Any]:
    """Every row of a list, a row a page, following its cursor (the parameter ``on``);
    each row once."""
    seen: list[Any] = []
    cursor = ""
    for _ in range(100):
        page = json_of(reading, path, **params, limit="1", **{on: cursor})
        assert page is not None, (path, params)
        assert len(page[rows]) <= 1
        seen += [key(row) for row in page[rows]]
        cursor = page["next"]
        if not cursor:
            assert len(seen) == len(set(seen)), (path, params, seen)
            return seen
    raise AssertionError(f"{path} {params} does not end")


def printed(argv: list[str], capsys: pytest.CaptureFixture[str], *, terminal: bool) -> str:
    """What a command prints, checked: exit 0, no traceback, nothing raw."""
    os.environ["TTY_COMPATIBLE"] = "1" if terminal else "0"
    try:
        status = main(argv)
    finally:
        del os.environ["TTY_COMPATIBLE"]
    out, err = capsys.readouterr()
    assert status == 0, (argv, err)
    assert "Traceback" not in err, (argv, err)
    shown = RICH_STYLE.sub("", out + err) if terminal else out + err
    assert RAW.search(shown) is None, (argv, repr(shown[:3000]))
    return out


# -- the readers --------------------------------------------------------------------------


def read_pages(reading: Reading, agents: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    client = reading.client
    pages: list[tuple[str, dict[str, str]]] = [
        ("/ui/", {}),
        ("/ui/", {"archived": "1"}),
        ("/ui/overview", {}),
        ("/ui/overview", {"days": "30", "to": "9999-12-31"}),
        *(("/ui/runs", {"sort": sort}) for sort in ("newest", "duration", "tokens")),
        *(("/ui/agent", {"id": agent["agentId"]}) for agent in agents),
        ("/ui/export/agent.jsonl", {"id": agents[0]["agentId"]}),
    ]
    for run in runs:
        of = {"agent": run["agentId"]}
        pages += [
            ("/ui/run", {**of, "id": run["runId"]}),
            ("/ui/run", {"id": run["runId"]}),
            ("/ui/outline", {**of, "id": run["runId"]}),
            ("/ui/events", {**of, "run": run["runId"]}),
            ("/ui/export/run.jsonl", {**of, "run": run["runId"]}),
            ("/ui/export/transcript.md", {**of, "run": run["runId"]}),
        ]
    for path, params in pages:
        answered(client.get(path, params=params), f"{path} {params}")
        if "export" not in path:
            data = json_of(reading, path, **params)
            if path == "/ui/run" and "agent" in params:
                fragment = client.get(path, params={**params, "format": "fragment"})
                answered(fragment, f"fragment {params}")
                assert len(data["blocks"]) <= DEFAULT_EVENTS_PAGE
    agent_ids = {agent["agentId"] for agent in agents}
    listed = walk(reading, "/ui/", "agents", lambda row: row["agentId"], archived="1")
    assert set(listed) == agent_ids
    for sort in ("newest", "duration", "tokens"):
        listed = walk(reading, "/ui/runs", "runs", lambda row: row["runId"], sort=sort)
        assert set(listed) == {run["runId"] for run in runs}, sort
    for run in runs:
        events = walk(
            reading,
            "/ui/events",
            "events",
            lambda row: row["seq"],
            on="after",
            agent=run["agentId"],
            run=run["runId"],
        )
        assert events == sorted(events)


def search(reading: Reading, query: str) -> None:
    cursor = ""
    for _ in range(50):
        params = {"q": query, "cursor": cursor}
        answered(reading.client.get("/ui/search", params=params), f"search {params}")
        page = reading.client.get("/ui/search", params={**params, "format": "json"})
        answered(page, f"search {params}")
        if page.status_code != 200:
            return  # a query the viewer refuses (one holding NUL): a 400
        assert len(page.content) <= MAX_PAGE_BYTES
        assert len(page.json()["hits"]) <= HITS_PER_PAGE
        cursor = page.json()["next"]
        if not cursor:
            return
    raise AssertionError(f"search {query!r} does not end")


#: The read commands in every output mode: (argv before the source, whether on a
#: Rich terminal, whether its lines are JSON, argv after the source). ``{agent}`` and
#: ``{run}`` are the example's first agent and run; an id may start with "-", so it is
#: given after ``--`` or as ``--agent=ID``.
COMMANDS: list[tuple[list[str], bool, bool, list[str]]] = [
    (["agents", "--archived"], True, False, []),
    (["agents", "--archived"], False, False, []),
    (["agents", "--archived", "--json"], False, True, []),
    (["runs"], True, False, []),
    (["runs"], False, False, []),
    (["runs", "--json", "--sort", "duration"], False, True, []),
    (["runs"], True, False, ["--", "{agent}"]),
    (["runs", "--json"], False, True, ["--", "{agent}"]),
    (["overview"], True, False, []),
    (["overview", "--json", "--days", "30"], False, True, []),
    (["transcript", "--agent={agent_of_run}"], True, False, ["--", "{run}"]),
    (["transcript", "--agent={agent_of_run}"], False, False, ["--", "{run}"]),
    (["transcript", "--agent={agent_of_run}", "--json"], False, True, ["--", "{run}"]),
    (["transcript", "--agent={agent_of_run}", "--markdown"], True, False, ["--", "{run}"]),
]
#: Each example runs this many of them (each costs a whole command's start), so a
#: few dozen examples run each many times over.
COMMANDS_PER_EXAMPLE = 4


def read_commands(
    source: list[str],
    chosen: list[int],
    agents: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    names = {"agent": agents[0]["agentId"]}
    if runs:
        names.update(run=runs[0]["runId"], agent_of_run=runs[0]["agentId"])
    for index in chosen:
        before, terminal, lines, after = COMMANDS[index]
        if any("{run}" in arg for arg in after) and not runs:
            continue
        argv = [arg.format(**names) if "{" in arg else arg for arg in before]
        argv += source + [arg.format(**names) if "{" in arg else arg for arg in after]
        out = printed(argv, capsys, terminal=terminal)
        if lines:
            for line in out.split("\n")[:-1]:
                json.loads(line)


def metrics(reading: Reading) -> None:
    response = reading.client.get("/metrics")
    answered(response, "/metrics")
    assert response.status_code == 200
    assert list(text_string_to_metric_families(response.text))


# -- the property ---------------------------------------------------------------------------


def test_every_reader_shows_whatever_the_store_accepted(
    reading: Reading,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    if request.config.getoption("hypothesis_profile", None) == "fuzz-long":
        chosen = settings(
            settings.get_profile("fuzz-long"),
            max_examples=EXAMPLES[reading.backend] * LONG_RUN_FACTOR,
        )
    else:
        chosen = settings(FUZZ, max_examples=EXAMPLES[reading.backend])
    direct = reading.backend != "memory"  # a memory store is the server's alone

    @chosen
    @given(histories())
    def check(history: History) -> None:
        agents: list[dict[str, Any]] = []
        runs: list[dict[str, Any]] = []
        try:
            for substore, method, data in history.calls:
                answer = reading.call(substore, method, data)
                assert answer.status_code < 500, answer.text
                if answer.status_code == 200 and method == "create":
                    (agents if substore == "agents" else runs).append(next(iter(data.values())))
            if not agents:
                return
            read_pages(reading, agents, runs)
            search(reading, history.query)
            metrics(reading)
            source = ["--store", reading.store] if direct and history.source == "direct" else []
            read_commands(source or reading.remote, history.commands, agents, runs, capsys)
            if direct and history.archive:
                archive = tmp_path / "history.tar.gz"
                argv = ["export", "--store", reading.store, "--output", str(archive)]
                printed(argv, capsys, terminal=False)
                archive.unlink()
        finally:
            reading.clear()

    check()
