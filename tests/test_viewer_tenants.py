"""The viewer with named tokens of two tenants on one server, on every backend: each
token sees its own tenant's history only, in every page, its JSON, exports, search
(by index on SQL, by scan elsewhere) and live polling; a ``read`` token is enough."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .support.history import (
    ANSWER,
    DOCS_AGENT,
    FINISHED_RUN,
    LIVE_RUN,
    LOGIN_AGENT,
    PROMPT,
    agent,
    history_calls,
    message,
    run,
    text,
)

WRITE_A = "team-a-writer-token"
READ_A = "team-a-reader-token"
WRITE_B = "team-b-writer-token"
READ_B = "team-b-reader-token"
#: The failed test's tool call of team A's finished run, as search shows it.
FAILED_TEST = "1 failed: test_redirect_keeps_next"
#: Team B's history reuses team A's agent and run ids with words of its own.
B_NAME = "fix login for beta"
B_PROMPT = "Mend the login redirect of the beta quokka portal"
B_ONLY_AGENT = "agent-beta"


def registry() -> TokenRegistry:
    def entry(name: str, token: str, tenant: str, scope: Scope) -> TokenEntry:
        return TokenEntry(name, token_digest(token), tenant, scope)

    return TokenRegistry(
        [
            entry("a-writer", WRITE_A, "team-a", Scope.WRITE),
            entry("a-reader", READ_A, "team-a", Scope.READ),
            entry("b-writer", WRITE_B, "team-b", Scope.WRITE),
            entry("b-reader", READ_B, "team-b", Scope.READ),
        ]
    )


def team_b_calls() -> list[tuple[str, str, dict[str, Any]]]:
    user = {"type": "user", "message": {"role": "user", "content": [text(B_PROMPT)]}}
    answer = {"type": "assistant", "message": {"role": "assistant", "content": [text("quokka")]}}
    return [
        ("agents", "create", {"agent": agent(LOGIN_AGENT, B_NAME, "/beta", "idle", 5)}),
        ("agents", "create", {"agent": agent(B_ONLY_AGENT, "quokka notes", "/beta", "idle", 4)}),
        ("runs", "create", {"run": run(LOGIN_AGENT, FINISHED_RUN, 1, "finished")}),
        ("runs", "create", {"run": run(B_ONLY_AGENT, "run-beta", 1, "running")}),
        ("runEvents", "append", message(LOGIN_AGENT, FINISHED_RUN, user)),
        ("runEvents", "append", message(B_ONLY_AGENT, "run-beta", answer)),
    ]


def store(url: str, token: str, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
    for substore, method, data in calls:
        response = httpx.post(
            url + CALL_STORE_PATH,
            json={"substore": substore, "method": method, "input": data},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text


BACKENDS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue(f"make_{request.param}_url")()
    app = create_app(ServerConfig(routes=Routes.single(url), tokens=registry()))
    with running(app) as base:
        store(base, WRITE_A, history_calls())
        store(base, WRITE_B, team_b_calls())
        yield base


def viewer(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})


def test_each_tenant_sees_only_its_own_agents_runs_and_transcripts(server: str) -> None:
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        assert [x["agentId"] for x in a.get("/ui/?format=json").json()["agents"]] == [
            LOGIN_AGENT,
            DOCS_AGENT,
        ]
        assert [x["agentId"] for x in b.get("/ui/?format=json").json()["agents"]] == [
            LOGIN_AGENT,
            B_ONLY_AGENT,
        ]
        # One agent id, two independent agents.
        assert a.get(f"/ui/agent?id={LOGIN_AGENT}&format=json").json()["agent"]["name"] == (
            "fix login"
        )
        assert b.get(f"/ui/agent?id={LOGIN_AGENT}&format=json").json()["agent"]["name"] == B_NAME
        assert B_NAME not in a.get(f"/ui/agent?id={LOGIN_AGENT}").text
        run_a = a.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
        assert PROMPT in run_a.text
        assert B_PROMPT not in run_a.text
        run_b = b.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
        assert B_PROMPT in run_b.text
        assert PROMPT not in run_b.text
        # The other tenant's items are not there at all, whichever way they are asked.
        assert a.get(f"/ui/agent?id={B_ONLY_AGENT}&format=json").status_code == 404
        assert a.get("/ui/run?id=run-beta&format=json").status_code == 404
        assert a.get(f"/ui/run?agent={B_ONLY_AGENT}&id=run-beta&format=json").status_code == 404
        assert b.get(f"/ui/agent?id={DOCS_AGENT}").status_code == 404
        events = a.get(f"/ui/events?agent={LOGIN_AGENT}&run={FINISHED_RUN}&format=json").json()
        assert len(events["events"]) == 17
        assert "quokka" not in str(events)


def test_live_polling_reads_the_pollers_tenant_only(server: str) -> None:
    # Team A follows its live run; team B then writes under the same run id.
    with viewer(server, READ_A) as a:
        first = a.get(f"/ui/run?agent={DOCS_AGENT}&id={LIVE_RUN}&format=fragment").json()
        assert first["live"] is True
        store(
            server, WRITE_B, [("runs", "create", {"run": run(DOCS_AGENT, LIVE_RUN, 1, "running")})]
        )
        secret = {
            "type": "assistant",
            "message": {"role": "assistant", "content": [text("quokka")]},
        }
        store(server, WRITE_B, [("runEvents", "append", message(DOCS_AGENT, LIVE_RUN, secret))])
        after = first["next"] or ""
        polled = a.get(
            f"/ui/run?agent={DOCS_AGENT}&id={LIVE_RUN}&after={after}&format=fragment"
        ).json()
        assert "quokka" not in polled["html"]
        assert polled["blocks"] is None
        assert polled["more"] is False
    with viewer(server, READ_B) as b:
        theirs = b.get(f"/ui/run?agent={DOCS_AGENT}&id={LIVE_RUN}&format=fragment").json()
        assert "quokka" in theirs["html"]


def test_exports_hold_one_tenant(server: str) -> None:
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        export_a = a.get(f"/ui/export/agent.jsonl?id={LOGIN_AGENT}")
        assert export_a.status_code == 200
        assert ANSWER in export_a.text
        assert "quokka" not in export_a.text
        export_b = b.get(f"/ui/export/agent.jsonl?id={LOGIN_AGENT}")
        assert "quokka" in export_b.text
        assert ANSWER not in export_b.text
        assert a.get(f"/ui/export/agent.jsonl?id={B_ONLY_AGENT}").status_code == 404
        assert a.get(f"/ui/export/run.jsonl?agent={B_ONLY_AGENT}&run=run-beta").status_code == 404
        markdown = a.get(f"/ui/export/transcript.md?agent={LOGIN_AGENT}&run={FINISHED_RUN}")
        assert PROMPT in markdown.text
        assert B_PROMPT not in markdown.text
        other = a.get(f"/ui/export/transcript.md?agent={B_ONLY_AGENT}&run=run-beta")
        assert other.status_code == 404


def test_search_finds_the_searchers_tenant_only(
    server: str, request: pytest.FixtureRequest
) -> None:
    # SQL stores answer from their full-text index, the others by reading.
    sql = request.node.callspec.params["server"] in ("sqlite", "postgres")
    method = "index" if sql else "scan"
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        assert a.get("/ui/search?q=quokka&format=json").json()["method"] == method
        assert a.get("/ui/search?q=quokka&format=json").json()["hits"] == []
        assert a.get("/ui/search?q=beta&format=json").json()["hits"] == []
        theirs = b.get("/ui/search?q=quokka&format=json").json()["hits"]
        assert sorted((hit["kind"], hit["agent"]["agentId"]) for hit in theirs) == [
            ("agent", B_ONLY_AGENT),
            ("assistant", B_ONLY_AGENT),
            ("user", LOGIN_AGENT),
        ]
        # A word both tenants wrote: each finds its own run's text.
        ours = a.get("/ui/search?q=redirect&format=json").json()["hits"]
        assert [hit["text"] for hit in ours][::2] == [PROMPT, ANSWER]
        assert ours[1]["text"].endswith(FAILED_TEST)
        beta = b.get("/ui/search?q=redirect&format=json").json()["hits"]
        assert [hit["text"] for hit in beta] == [B_PROMPT]
        shown = "search index" if method == "index" else "reads the history"
        assert shown in a.get("/ui/search?q=redirect").text
        page = a.get("/ui/search?q=quokka")
        assert page.status_code == 200
        assert "quokka portal" not in page.text


def test_a_read_token_signs_in_and_cannot_write(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        form = client.get("/ui/sign-in")
        csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        signed = client.post(
            "/ui/sign-in",
            data={"csrf": csrf, "token": READ_B, "next": "/ui/"},
            headers={"Origin": server},
        )
        assert signed.status_code == 303
        page = client.get("/ui/")
        assert page.status_code == 200
        assert "quokka notes" in page.text
        assert "write docs" not in page.text
    refused = httpx.post(
        server + CALL_STORE_PATH,
        json={"substore": "agents", "method": "delete", "input": {"filter": {}}},
        headers={"Authorization": f"Bearer {READ_B}"},
    )
    assert refused.status_code == 403
    assert refused.json()["code"] == "permission_denied"


def test_who_started_it_and_who_is_signed_in_are_each_tenants_own(server: str) -> None:
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        mine = a.get("/ui/?format=json").json()
        assert mine["signedIn"] == {"name": "a-reader", "tenant": "team-a"}
        assert {x["agentId"]: x["createdBy"] for x in mine["agents"]} == {
            LOGIN_AGENT: "a-writer",
            DOCS_AGENT: "a-writer",
        }
        theirs = b.get(f"/ui/agent?id={LOGIN_AGENT}&format=json").json()
        assert theirs["agent"]["createdBy"] == "b-writer"
        assert [run["createdBy"] for run in theirs["runs"]] == ["b-writer"]
        run_a = a.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}&format=json").json()
        assert run_a["run"]["createdBy"] == "a-writer"
        page = b.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
        assert "b-writer" in page.text
        assert "a-writer" not in page.text
        assert "Signed in as <strong>b-reader</strong>" in page.text
        assert "(tenant team-b)" in page.text
        missing = b.get(f"/ui/agent?id={DOCS_AGENT}")
        assert missing.status_code == 404
        assert "Signed in as <strong>b-reader</strong>" in missing.text


def test_the_run_list_across_agents_holds_one_tenant(
    server: str, request: pytest.FixtureRequest
) -> None:
    # SQL stores list from their summary columns, the others by reading every run.
    sql = request.node.callspec.params["server"] in ("sqlite", "postgres")
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        mine = a.get("/ui/runs?format=json").json()
        assert mine["method"] == ("index" if sql else "scan")
        assert [(r["agentId"], r["runId"], r["createdBy"]) for r in mine["runs"]] == [
            (LOGIN_AGENT, "run-login-2", "a-writer"),
            (LOGIN_AGENT, FINISHED_RUN, "a-writer"),
            (DOCS_AGENT, LIVE_RUN, "a-writer"),
        ]
        theirs = b.get("/ui/runs?format=json&sort=tokens").json()
        assert {(r["agentId"], r["runId"], r["createdBy"]) for r in theirs["runs"]} == {
            (LOGIN_AGENT, FINISHED_RUN, "b-writer"),
            (B_ONLY_AGENT, "run-beta", "b-writer"),
        }
        # Filters and the other order never reach across either.
        assert a.get("/ui/runs?format=json&by=b-writer").json()["runs"] == []
        assert a.get("/ui/runs?format=json&cwd=/beta").json()["runs"] == []
        page = a.get("/ui/runs?sort=duration")
        assert page.status_code == 200
        assert "quokka" not in page.text
        assert "b-writer" not in page.text


def test_the_overview_counts_one_tenant(server: str, request: pytest.FixtureRequest) -> None:
    sql = request.node.callspec.params["server"] in ("sqlite", "postgres")
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        mine = a.get("/ui/overview?format=json&to=2026-05-28").json()
        assert mine["method"] == ("index" if sql else "scan")
        week = mine["windows"]["7"]["total"]
        assert (week["runs"], week["failed"]) == (3, 1)
        assert [t["tool"] for t in week["tools"]["byCalls"]] == ["read_file", "run_terminal_cmd"]
        theirs = b.get("/ui/overview?format=json&to=2026-05-28&days=30").json()
        month = theirs["windows"]["30"]["total"]
        assert (month["runs"], month["failed"]) == (2, 0)
        assert month["tools"] == {"byCalls": [], "byFailures": []}
        assert month["tokens"]["inputTokens"] == 0
        page = b.get("/ui/overview?to=2026-05-28")
        assert page.status_code == 200
        assert "read_file" not in page.text
        assert "read_file" in a.get("/ui/overview?to=2026-05-28").text


def test_a_run_s_outline_and_timeline_are_its_tenant_s(server: str) -> None:
    with viewer(server, READ_A) as a, viewer(server, READ_B) as b:
        mine = a.get(f"/ui/outline?agent={LOGIN_AGENT}&id={FINISHED_RUN}&format=json").json()
        assert mine["firstError"]["label"].startswith("run_terminal_cmd (error")
        theirs = b.get(f"/ui/outline?agent={LOGIN_AGENT}&id={FINISHED_RUN}&format=json").json()
        assert [step["label"] for step in theirs["steps"]] == [f"Prompt: {B_PROMPT}"]
        assert theirs["firstError"] is None
        assert a.get(f"/ui/outline?agent={B_ONLY_AGENT}&id=run-beta").status_code == 404
        page = b.get(f"/ui/outline?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
        assert "run_terminal_cmd" not in page.text


@pytest.mark.parametrize(
    "query",
    [
        "runs?model=%00&format=json",
        "runs?by=%00%ff&format=json",
        "runs?cwd=" + "x" * 5000 + "&format=json",
        "runs?since=9999-99-99&format=json",
        "runs?until=0000-01-01&format=json",
        "runs?sort=../etc&format=json",
        "runs?limit=-1&format=json",
        "runs?cursor=%00&format=json",
        "runs?model=%ED%A0%80&format=json",
        "overview?days=1e9&format=json",
        "overview?to=-1&format=json",
        "overview?to=0001-01-01&format=json",
        "overview?to=9999-12-31&format=json",
        "outline?agent=%00&id=x&format=json",
    ],
)
def test_hostile_parameters_of_the_new_pages_are_the_client_s_mistake(
    server: str, query: str
) -> None:
    with viewer(server, READ_A) as a:
        response = a.get(f"/ui/{query}")
        assert response.status_code < 500, response.text
        if response.status_code != 200:
            assert response.json()["code"] in ("invalid_argument", "not_found")
