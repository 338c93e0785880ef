"""``bridge-store demo`` and its sample team history (``bridge_store.demo``).

The sample: the same for a seed, counted back from now, every event in the bridge's
shape, and everything the viewer has to show (two tenants, three models, failed and
cancelled runs, tool calls that fail, usage, creators, a run of thousands of events).
Then every page, export, search and history command over it, and the command itself:
its tokens per tenant, its refusal of a store with other history, its restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.backend.stored_documents import validate_stored_event
from bridge_store.client._process import START_TIMEOUT_SECONDS, StderrPump
from bridge_store.conformance.harness import agent as agent_document
from bridge_store.demo.fill import fill
from bridge_store.demo.history import DAY_MS, sample_history
from bridge_store.demo.team import PEOPLE
from bridge_store.lifecycle.sink import StoreSink
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.security.encryption import KEY_FILE_ENV, is_sealed_metadata
from bridge_store.security.tokens_file import load_entries
from bridge_store.server.app import create_app
from bridge_store.server.config import READY_PREFIX, ServerConfig
from bridge_store.stack.stores import Routes, StoreStack
from bridge_store.viewer.transcript import build
from testkit.inprocess import running

from .support.sample import NOW, sample, write_sample

#: The message types a bridge stores (shared/EVENTS.md), ``system`` never locally.
MESSAGE_TYPES = {"request", "status", "user", "assistant", "thinking", "tool_call", "task", "usage"}
LONG_RUN_EVENTS = 3_000


def test_the_sample_is_the_same_for_a_seed_and_counts_back_from_now() -> None:
    assert sample_history(now_ms=NOW) == sample()
    other = sample_history(seed=7, now_ms=NOW)
    assert {a.agent_id for a in other.agents}.isdisjoint(a.agent_id for a in sample().agents)
    later = sample_history(now_ms=NOW + DAY_MS)
    assert [a.document["updatedAt"] - DAY_MS for a in later.agents] == [
        a.document["updatedAt"] for a in sample().agents
    ]
    times = [
        value
        for agent in sample().agents
        for document in (agent.document, *(run.document for run in agent.runs))
        for value in (document["createdAt"], document["updatedAt"])
    ]
    times += [
        event["createdAt"] for agent in sample().agents for r in agent.runs for event in r.events
    ]
    assert min(times) > NOW - 15 * DAY_MS
    assert max(times) < NOW


def test_every_event_has_the_shape_the_bridge_writes() -> None:
    for agent in sample().agents:
        for run in agent.runs:
            run_id = run.document["runId"]
            assert [event["seq"] for event in run.events] == list(range(1, len(run.events) + 1))
            stamps = [event["createdAt"] for event in run.events]
            assert stamps == sorted(stamps)
            assert run.document["startedAt"] <= stamps[0]
            assert stamps[-1] <= run.document["endedAt"]
            for event in run.events:
                assert validate_stored_event(event, "event") == event
                assert event["eventType"] == "run_stream_event"
                payload = event["payload"]
                assert {k: payload[k] for k in ("schemaVersion", "type", "agentId", "runId")} == {
                    "schemaVersion": 1,
                    "type": "sdk_message",
                    "agentId": agent.agent_id,
                    "runId": run_id,
                }
                message = payload["message"]
                assert message["type"] in MESSAGE_TYPES
                assert (message["agent_id"], message["run_id"]) == (agent.agent_id, run_id)
            kinds = [event["payload"]["message"]["type"] for event in run.events]
            assert kinds[:3] == ["request", "status", "user"]
            status = run.events[-1]["payload"]["message"]
            assert status["type"] == "status"
            assert status["status"] == run.document["status"].upper()


def test_the_sample_holds_what_the_viewer_has_to_show() -> None:
    agents = sample().agents
    runs = [run for agent in agents for run in agent.runs]
    assert sorted({agent.tenant for agent in agents}) == ["app-team", "platform"]
    assert len({run.document["model"]["id"] for run in runs}) == 3
    assert Counter(run.document["status"] for run in runs) >= Counter(
        {"finished": 10, "error": 1, "cancelled": 1}
    )
    (failed,) = [run for run in runs if run.document["status"] == "error"]
    assert failed.document["error"].startswith("[resource_exhausted] ")
    assert failed.events[-1]["payload"]["message"]["message"] == failed.document["error"]
    for run in runs:
        kinds = {event["payload"]["message"]["type"] for event in run.events}
        if run.document["status"] == "finished":
            assert run.document["usage"]["totalTokens"] > 0
            assert "usage" in kinds
            assert {"thinking", "assistant", "tool_call"} <= kinds
    calls = [
        event["payload"]["message"]
        for run in runs
        for event in run.events
        if event["payload"]["message"]["type"] == "tool_call"
    ]
    assert {call["status"] for call in calls} == {"running", "completed", "error"}
    assert all("args" in call for call in calls)
    assert all("result" in call for call in calls if call["status"] != "running")
    assert max(len(run.events) for run in runs) >= LONG_RUN_EVENTS
    assert [agent.story.name for agent in agents if agent.document["status"] == "archived"]
    for agent in agents:
        assert PEOPLE[agent.story.creator] == agent.tenant
    first, last = (
        min(a.document["createdAt"] for a in agents),
        max(a.document["updatedAt"] for a in agents),
    )
    assert last - first > 12 * DAY_MS
    # The viewer's transcript folds the deltas back into whole texts and cards.
    long_run = max(runs, key=lambda run: len(run.events))
    blocks = build(long_run.events).blocks
    assert len(blocks) < len(long_run.events) / 2
    assert blocks[-1].to_json()["status"] == "FINISHED"


@pytest.fixture(scope="module")
def sample_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'sample.db'}"
    write_sample(url)
    return url


def person(name: str) -> str:
    """A made-up token of one of the sample's people, for the in-process server."""
    return f"token-of-{name}-for-the-demo-tests"


@pytest.fixture(scope="module")
def team_server(sample_url: str) -> Iterator[str]:
    tokens = TokenRegistry(
        [
            TokenEntry(name, token_digest(person(name)), tenant, Scope.WRITE)
            for name, tenant in PEOPLE.items()
        ]
    )
    with running(create_app(ServerConfig(routes=Routes.single(sample_url), tokens=tokens))) as url:
        yield url


def test_every_page_export_and_search_shows_the_sample(team_server: str) -> None:
    headers = {"Authorization": f"Bearer {person('alice')}"}
    mine = [a for a in sample().agents if a.tenant == "app-team"]
    with httpx.Client(base_url=team_server, headers=headers, timeout=60) as alice:
        listed = alice.get("/ui/?archived=1&format=json").json()
        assert {a["agentId"] for a in listed["agents"]} == {a.agent_id for a in mine}
        creators = {a["agentId"]: a["createdBy"] for a in listed["agents"]}
        assert creators == {a.agent_id: a.story.creator for a in mine}
        for agent in mine:
            page = alice.get(f"/ui/agent?id={agent.agent_id}&format=json").json()
            assert [r["runId"] for r in sorted(page["runs"], key=lambda r: r["turnNumber"])] == [
                run.document["runId"] for run in agent.runs
            ]
            for run in agent.runs:
                query = f"agent={agent.agent_id}&id={run.document['runId']}"
                shown = alice.get(f"/ui/run?{query}")
                assert shown.status_code == 200, query
                assert agent.story.name in shown.text
                export = f"agent={agent.agent_id}&run={run.document['runId']}"
                lines = alice.get(f"/ui/export/run.jsonl?{export}").text.splitlines()
                assert len(lines) == 1 + len(run.events)
                markdown = alice.get(f"/ui/export/transcript.md?{export}").text
                assert markdown.startswith(f"# {agent.story.name}: turn ")
                assert alice.get(f"/ui/outline?{query}").status_code == 200
        runs = alice.get("/ui/runs?format=json").json()
        assert {r["createdBy"] for r in runs["runs"]} == {"alice", "bob", "carol"}
        assert alice.get("/ui/overview").status_code == 200
        hits = alice.get("/ui/search?q=Vitest&format=json").json()["hits"]
        assert any("Move the test suite to Vitest" in json.dumps(hit) for hit in hits)
        # A failing tool call of the flaky test, and the failed run's error.
        found = alice.get("/ui/search?q=resource_exhausted&format=json").json()["hits"]
        assert found
    platform = {"Authorization": f"Bearer {person('dana')}"}
    with httpx.Client(base_url=team_server, headers=platform, timeout=60) as dana:
        theirs = dana.get("/ui/?format=json").json()
        assert {a["agentId"] for a in theirs["agents"]} == {
            a.agent_id for a in sample().agents if a.tenant == "platform"
        }
        assert dana.get("/ui/search?q=Vitest&format=json").json()["hits"] == []


def run_command(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_history_commands_read_the_sample(sample_url: str) -> None:
    long_run = max(
        (run for agent in sample().agents for run in agent.runs), key=lambda r: len(r.events)
    )
    runs = run_command("runs", "--store", sample_url, "--tenant", "app-team", "--json")
    assert runs.returncode == 0, runs.stderr
    assert len(runs.stdout.splitlines()) == sum(
        len(a.runs) for a in sample().agents if a.tenant == "app-team"
    )
    run_id = long_run.document["runId"]
    transcript = run_command(
        "transcript", run_id, "--store", sample_url, "--tenant", "app-team", "--json"
    )
    assert [json.loads(line)["seq"] for line in transcript.stdout.splitlines()] == list(
        range(1, len(long_run.events) + 1)
    )
    overview = run_command("overview", "--store", sample_url, "--tenant", "platform")
    assert overview.returncode == 0, overview.stderr


@contextmanager
def demo(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any], list[str]]]:
    """``bridge-store demo *args`` in ``cwd`` until its ready line; stopped after.
    ``env`` adds to an environment without any BRIDGE_STORE_* variable."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "demo", "--port", "0", *args],
        cwd=cwd,
        env={
            **{
                name: value
                for name, value in os.environ.items()
                if not name.startswith("BRIDGE_STORE_")
            },
            **(env or {}),
        },
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    pump = StderrPump(process.stderr, READY_PREFIX, None)
    try:
        ready = pump.wait_ready(START_TIMEOUT_SECONDS)
        assert ready is not None, "".join(pump.tail())
        before = [line for line in pump.tail() if line.startswith("bridge-store demo: ")]
        yield process, json.loads(ready.removeprefix(READY_PREFIX)), before
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(START_TIMEOUT_SECONDS)


def test_demo_serves_the_sample_with_a_token_per_tenant(tmp_path: Path) -> None:
    with demo(tmp_path) as (process, ready, said):
        assert ready["viewerUrl"] == ready["url"] + "ui/"
        assert ready["authTokenFile"] == str(tmp_path / "bridge-store-demo.token")
        assert said[0].startswith(
            "bridge-store demo: wrote a sample team's history into "
            "sqlite:///bridge-store-demo.db in "
        )
        assert said[1] == (
            "bridge-store demo: sign in to the viewer as alice (tenant app-team) with the "
            f"token in {tmp_path / 'bridge-store-demo.token'}, or as dana (tenant platform) "
            f"with the token in {tmp_path / 'bridge-store-demo.platform.token'}\n"
        )
        for name in ("bridge-store-demo.token", "bridge-store-demo.platform.token"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
        entries = load_entries(tmp_path / "bridge-store-demo.tokens.toml")
        assert {(e.name, e.tenant, e.scope) for e in entries} == {
            (name, tenant, Scope.WRITE) for name, tenant in PEOPLE.items()
        }
        for token_file, who, tenant in (
            ("bridge-store-demo.token", "alice", "app-team"),
            ("bridge-store-demo.platform.token", "dana", "platform"),
        ):
            token = (tmp_path / token_file).read_text().strip()
            page = httpx.get(
                ready["viewerUrl"] + "?format=json", headers={"Authorization": f"Bearer {token}"}
            ).json()
            assert page["signedIn"] == {"name": who, "tenant": tenant}
            assert {a["createdBy"] for a in page["agents"]} <= set(PEOPLE)
            assert len(page["agents"]) >= 4
            listed = run_command(
                "agents", "--store-callback-url", ready["viewerUrl"],
                "--store-auth-token-file", str(tmp_path / token_file),
            )  # fmt: skip
            assert listed.returncode == 0, listed.stderr
            assert len(listed.stdout.splitlines()) == 1 + len(page["agents"])
    assert process.returncode == 0
    # Again on its own store: served as it is, the same agents, the same sign-in.
    token = (tmp_path / "bridge-store-demo.token").read_text()
    with demo(tmp_path) as (_, again, said):
        assert said[0] == (
            "bridge-store demo: serving the sample history written before into "
            "sqlite:///bridge-store-demo.db (--force writes it afresh)\n"
        )
        assert (tmp_path / "bridge-store-demo.token").read_text() == token
        page = httpx.get(
            again["viewerUrl"] + "?format=json",
            headers={"Authorization": f"Bearer {token.strip()}"},
        )
        assert page.status_code == 200


def test_demo_never_writes_into_a_store_with_other_history_unless_forced(
    tmp_path: Path,
) -> None:
    store = tmp_path / "mine.db"
    url = f"sqlite:///{store}"
    created = run_command("db", "upgrade", "--store", url)
    assert created.returncode == 0, created.stderr

    async def mine(then: str) -> int:
        async with StoreStack.of(Routes.single(url)).opened(migrate=False) as stack:
            if then == "create":
                await stack.stores.agents.create("default", agent_document("my-agent"))
            return len(await stack.stores.agents.tenants())

    asyncio.run(mine("create"))
    refused = run_command("demo", "--store", url, "--port", "0")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"bridge-store: {url} already holds history; the demo writes only into a new or empty "
        "store: give another --store, or --force to add the sample to it\n"
    )
    assert asyncio.run(mine("count")) == 1
    assert not (tmp_path / "mine.tokens.toml").exists()
    with demo(tmp_path, "--store", url, "--force") as (_, ready, said):
        assert said[0].startswith(f"bridge-store demo: wrote a sample team's history into {url}")
        assert ready["authTokenFile"] == str(tmp_path / "mine.token")
    assert asyncio.run(mine("count")) == 3  # default (mine), app-team, platform


def test_a_start_stopped_midway_is_written_again(tmp_path: Path) -> None:
    # Ctrl-C during the fill leaves some agents written, each after its runs and events.
    url = f"sqlite:///{tmp_path / 'bridge-store-demo.db'}"
    items = list(sample_history().items())

    async def write_first_half() -> None:
        async with StoreStack.of(Routes.single(url)).opened(migrate=True) as stack:
            sink = StoreSink(stack.stores, overwrite=False)
            for item in items[: len(items) // 2]:
                await sink.write(item)

    asyncio.run(write_first_half())
    with demo(tmp_path) as (_, ready, said):
        assert said[0] == (
            "bridge-store demo: wrote again the sample history a stopped start had begun in "
            "sqlite:///bridge-store-demo.db\n"
        )
        token = (tmp_path / "bridge-store-demo.token").read_text().strip()
        listed = httpx.get(
            ready["viewerUrl"] + "?archived=1&format=json",
            headers={"Authorization": f"Bearer {token}"},
        ).json()
    assert len(listed["agents"]) == sum(a.tenant == "app-team" for a in sample().agents)


def test_demo_refuses_a_store_that_keeps_nothing() -> None:
    refused = run_command("demo", "--store", "memory://", "--port", "0")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "bridge-store: the demo writes its sample, then serves it: memory:// would be empty "
        "again; give a store that keeps what is written (sqlite:///, postgresql://, redis://)\n"
    )


def test_two_demos_filling_one_file_at_once_leave_one_whole_sample(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bridge-store-demo.db'}"
    expected = sample_history()

    async def fill_one() -> str:
        async with StoreStack.of(Routes.single(url)).opened(migrate=True) as stack:
            filled = await fill(stack.stores, sample_history(), where=url, force=False)
        return filled.value

    async def both() -> list[str]:
        return list(await asyncio.gather(fill_one(), fill_one()))

    outcomes = asyncio.run(both())
    assert set(outcomes) <= {"written", "kept", "completed"}

    async def held() -> dict[str, list[int]]:
        async with StoreStack.of(Routes.single(url)).opened(migrate=False) as stack:
            seqs = {}
            for agent in expected.agents:
                assert await stack.stores.agents.get(agent.tenant, agent.agent_id) is not None
                for run in agent.runs:
                    run_id = run.document["runId"]
                    events = await stack.stores.run_events.list(
                        agent.tenant, run_id, after_seq=0, limit=10_000
                    )
                    seqs[run_id] = [event["seq"] for event in events]
            return seqs

    for run_id, seqs in asyncio.run(held()).items():
        length = next(
            len(r.events) for a in expected.agents for r in a.runs if r.document["runId"] == run_id
        )
        assert seqs == list(range(1, length + 1)), run_id


def test_a_demo_served_with_a_key_file_is_written_sealed(tmp_path: Path) -> None:
    # serve seals with the key file its variable names; the demo writes the same way,
    # or its sample would sit in the store as plaintext beside sealed agents.
    key_file = tmp_path / "keys"
    made = run_command("keys", "generate", "--encryption-key-file", str(key_file))
    assert made.returncode == 0, made.stderr
    with demo(tmp_path, env={KEY_FILE_ENV: str(key_file)}) as (_, ready, _said):
        token = (tmp_path / "bridge-store-demo.token").read_text().strip()
        first = sample().agents[1]
        page = httpx.get(
            ready["viewerUrl"] + f"agent?id={first.agent_id}&format=json",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert page.status_code == 200, page.text
    rows = sqlite3.connect(tmp_path / "bridge-store-demo.db").execute(
        "select doc from agents where agent_id = ?", (first.agent_id,)
    )
    (stored,) = [json.loads(row[0]) for row in rows]
    assert is_sealed_metadata(stored["sdkMetadata"])
