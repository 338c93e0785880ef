"""The web viewer over HTTP: sign-in and its cookie, every page and its JSON twin,
exports, errors, and the read-only standalone app."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.security.auth import SHORTHAND_TOKEN_NAME, TokenRegistry
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes, StoreStack, open_stores
from bridge_store.viewer.session import CSRF_COOKIE, SESSION_COOKIE
from bridge_store.viewer.standalone import create_ui_app
from testkit.inprocess import running

from .support.history import (
    ANSWER,
    DOCS_AGENT,
    FAILED_RUN,
    FINISHED_RUN,
    LOGIN_AGENT,
    PROMPT,
    T0,
    agent,
    history_calls,
    message,
    run,
    text,
)

TOKEN = "viewer-test-token"


def store_call(url: str, substore: str, method: str, data: object) -> httpx.Response:
    return httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )


@pytest.fixture
def server() -> Iterator[str]:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as url:
        for substore, method, data in history_calls():
            assert store_call(url, substore, method, data).status_code == 200
        yield url


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, "the page has no CSRF field"
    return found.group(1)


def sign_in(client: httpx.Client, token: str = TOKEN, **headers: str) -> httpx.Response:
    form = client.get("/ui/sign-in")
    return client.post(
        "/ui/sign-in",
        data={"csrf": csrf_of(form), "token": token, "next": "/ui/agent?id=" + LOGIN_AGENT},
        headers={"Origin": str(client.base_url).rstrip("/"), **headers},
    )


@pytest.fixture
def browser(server: str) -> Iterator[httpx.Client]:
    """A signed-in client (a browser, as far as cookies go)."""
    with httpx.Client(base_url=server) as client:
        assert sign_in(client).status_code == 303
        yield client


def test_every_page_sends_strangers_to_sign_in(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        for path in ("/ui/", f"/ui/agent?id={LOGIN_AGENT}", "/ui/search?q=x"):
            response = client.get(path)
            assert response.status_code == 303
            assert response.headers["location"].startswith("/ui/sign-in?next=%2Fui%2F")
            data = client.get(path + ("&" if "?" in path else "?") + "format=json")
            assert data.status_code == 401
            assert data.json()["code"] == "unauthenticated"
        export = client.get(f"/ui/export/run.jsonl?agent={LOGIN_AGENT}&run={FINISHED_RUN}")
        assert export.status_code == 401


def test_sign_in_keeps_the_token_sealed_in_a_strict_http_only_cookie(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        response = sign_in(client)
        assert response.status_code == 303
        assert response.headers["location"] == f"/ui/agent?id={LOGIN_AGENT}"
        cookie = next(
            header
            for header in response.headers.get_list("set-cookie")
            if header.startswith(SESSION_COOKIE)
        )
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert "Path=/ui" in cookie
        value = client.cookies[SESSION_COOKIE].strip('"')
        assert TOKEN not in value
        assert TOKEN.encode() not in base64.urlsafe_b64decode(value + "==")
        assert client.get("/ui/").status_code == 200


def test_sign_in_refuses_bad_tokens_forged_forms_and_other_origins(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        wrong = sign_in(client, token="not-the-token")
        assert wrong.status_code == 401
        assert "That token is not valid here." in wrong.text
        assert SESSION_COOKIE not in client.cookies
        form = client.get("/ui/sign-in")
        no_csrf = client.post("/ui/sign-in", data={"token": TOKEN}, headers={"Origin": server})
        assert no_csrf.status_code == 403
        forged = client.post(
            "/ui/sign-in", data={"csrf": "guess", "token": TOKEN}, headers={"Origin": server}
        )
        assert forged.status_code == 403
        elsewhere = client.post(
            "/ui/sign-in",
            data={"csrf": csrf_of(form), "token": TOKEN},
            headers={"Origin": "https://attacker.example"},
        )
        assert elsewhere.status_code == 403
        cross_site = sign_in(client, **{"Sec-Fetch-Site": "cross-site"})
        assert cross_site.status_code == 403
        assert SESSION_COOKIE not in client.cookies


def test_sign_in_only_returns_to_pages_of_the_viewer(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        for target in ("https://attacker.example/", "//attacker.example/ui/", "/healthz"):
            form = client.get("/ui/sign-in")
            response = client.post(
                "/ui/sign-in",
                data={"csrf": csrf_of(form), "token": TOKEN, "next": target},
                headers={"Origin": server},
            )
            assert response.headers["location"] == "/ui/", target


def test_the_session_cookie_never_authorises_call_store(browser: httpx.Client) -> None:
    response = browser.post(
        CALL_STORE_PATH,
        json={"substore": "agents", "method": "get", "input": {"agentId": LOGIN_AGENT}},
    )
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"


def test_a_tampered_or_foreign_cookie_is_no_session(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        sign_in(client)
        sealed = client.cookies[SESSION_COOKIE]
        client.cookies.set(SESSION_COOKIE, sealed[:-4] + "AAAA", path="/ui")
        assert client.get("/ui/").status_code == 303
    # Another server's secret cannot open this one's cookies (each makes its own).
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as other, httpx.Client(base_url=other) as client:
        client.cookies.set(SESSION_COOKIE, sealed, path="/ui")
        assert client.get("/ui/").status_code == 303


def test_sign_out_ends_the_session(browser: httpx.Client) -> None:
    page = browser.get("/ui/")
    signed_out = browser.post(
        "/ui/sign-out",
        data={"csrf": csrf_of(page)},
        headers={"Origin": str(browser.base_url).rstrip("/")},
    )
    assert signed_out.status_code == 303
    assert SESSION_COOKIE not in browser.cookies
    assert browser.get("/ui/").status_code == 303
    # Without the form's token, another page cannot sign anyone out.
    assert browser.post("/ui/sign-out").status_code == 403


def test_scripts_can_use_a_bearer_token_instead_of_a_session(server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    response = httpx.get(f"{server}/ui/?format=json", headers=headers)
    assert response.status_code == 200
    assert [a["agentId"] for a in response.json()["agents"]] == [LOGIN_AGENT, DOCS_AGENT]
    wrong = httpx.get(f"{server}/ui/?format=json", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_pages_and_their_json_show_the_same_data(browser: httpx.Client) -> None:
    agents = browser.get("/ui/?format=json").json()
    page = browser.get("/ui/").text
    for each in agents["agents"]:
        assert each["name"] in page
        assert each["agentId"] in page
    assert "old spike" not in page  # archived
    archived = browser.get("/ui/?archived=1").text
    assert "old spike" in archived

    agent = browser.get(f"/ui/agent?id={LOGIN_AGENT}&format=json").json()
    assert [r["runId"] for r in agent["runs"]] == [FAILED_RUN, FINISHED_RUN]
    html = browser.get(f"/ui/agent?id={LOGIN_AGENT}").text
    assert html.index("Turn 2") < html.index("Turn 1")
    assert "permission_denied" in html
    assert "1 min 23 s" in html

    run = browser.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}&format=json").json()
    assert [b["kind"] for b in run["blocks"]][:4] == ["request", "status", "user", "thinking"]
    html = browser.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}").text
    assert PROMPT in html
    assert "the redirect now keeps the next parameter." in html
    assert "Thinking for 1.5 s" in html
    assert "Show all" in html  # the long file read is cut to a preview
    assert 'data-key="call-call-read"' in html
    assert "run_terminal_cmd" in html
    assert "&#34;subtype&#34;:&#34;init&#34;" in html  # the unknown message, as JSON
    assert "sdkMetadata" not in json.dumps(agents) + json.dumps(agent) + json.dumps(run)


def test_filters_survive_paging_in_the_url(browser: httpx.Client) -> None:
    first = browser.get("/ui/?cwd=/src/app&archived=1&limit=1")
    assert "fix login" in first.text
    assert "old spike" not in first.text
    link = re.search(r'rel="next" href="([^"]+)"', first.text)
    assert link
    href = link.group(1).replace("&amp;", "&")
    assert "cwd=%2Fsrc%2Fapp" in href
    assert "archived=1" in href
    assert "limit=1" in href
    second = browser.get(href)
    assert "old spike" in second.text
    assert "fix login" not in second.text


def test_the_transcript_fragment_continues_from_an_offset(browser: httpx.Client) -> None:
    base = f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}"
    page = browser.get(base + "&format=fragment&after=14&limit=2").json()
    assert (page["next"], page["more"], page["live"]) == ("16", True, False)
    assert ANSWER in page["html"]
    assert "<html" not in page["html"]
    assert page["blocks"] is None


def test_raw_events_and_run_links_by_id(browser: httpx.Client) -> None:
    raw = browser.get(f"/ui/events?agent={LOGIN_AGENT}&run={FINISHED_RUN}&after=2&limit=1")
    assert raw.status_code == 200
    assert "Event 3" in raw.text
    assert "Event 4" not in raw.text
    moved = browser.get(f"/ui/run?id={FAILED_RUN}")
    assert moved.status_code == 303
    assert moved.headers["location"] == f"/ui/run?agent={LOGIN_AGENT}&id={FAILED_RUN}"


def test_exports(browser: httpx.Client) -> None:
    run = browser.get(f"/ui/export/run.jsonl?agent={LOGIN_AGENT}&run={FINISHED_RUN}")
    assert run.headers["content-type"].startswith("application/x-ndjson")
    assert run.headers["x-content-type-options"] == "nosniff"
    assert 'filename="run-run-login-1.jsonl"' in run.headers["content-disposition"]
    lines = [json.loads(line) for line in run.text.splitlines()]
    assert [line["type"] for line in lines] == ["run"] + ["event"] * 17
    assert [line["event"]["seq"] for line in lines[1:]] == list(range(1, 18))

    agent = browser.get(f"/ui/export/agent.jsonl?id={LOGIN_AGENT}")
    lines = [json.loads(line) for line in agent.text.splitlines()]
    assert [line["type"] for line in lines] == ["agent", "run"] + ["event"] * 17 + ["run"] + [
        "event"
    ] * 3
    assert "sdkMetadata" not in lines[0]["agent"]

    markdown = browser.get(f"/ui/export/transcript.md?agent={LOGIN_AGENT}&run={FINISHED_RUN}")
    assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
    assert markdown.text.startswith("# fix login: turn 1")
    assert f"### User\n\n{PROMPT}" in markdown.text


def test_mistakes_get_clear_errors_not_500s(browser: httpx.Client) -> None:
    cases = [
        ("/ui/?format=xml", 400, "invalid_argument"),
        ("/ui/?status=sleeping&format=json", 400, "invalid_argument"),
        ("/ui/?limit=many&format=json", 400, "invalid_argument"),
        ("/ui/?cursor=not-a-cursor&format=json", 400, "invalid_argument"),
        ("/ui/agent?format=json", 400, "invalid_argument"),
        ("/ui/agent?id=agent-nobody&format=json", 404, "not_found"),
        (f"/ui/run?agent={LOGIN_AGENT}&id=run-nothing&format=json", 404, "not_found"),
        (
            f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}&after=x&format=json",
            400,
            "invalid_argument",
        ),
        ("/ui/export/run.jsonl?agent=a&run=b", 404, "not_found"),
        ("/ui/export/agent.jsonl?id=", 400, "invalid_argument"),
    ]
    for path, status, code in cases:
        response = browser.get(path)
        assert (response.status_code, response.json()["code"]) == (status, code), path
    page = browser.get("/ui/agent?id=agent-nobody")
    assert page.status_code == 404
    assert "no agent" in page.text


def test_pages_forbid_framing_and_foreign_scripts(browser: httpx.Client) -> None:
    response = browser.get("/ui/")
    assert "script-src" not in response.headers["content-security-policy"]  # default-src 'self'
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert CSRF_COOKIE in browser.cookies
    assert browser.get("/ui/static/viewer.js").status_code == 200


def test_serve_without_the_viewer() -> None:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN, ui=False))
    with running(app) as url:
        assert httpx.get(f"{url}/ui/").status_code == 404
        assert store_call(url, "agents", "get", {"agentId": "a"}).status_code == 200


def test_the_standalone_viewer_reads_and_cannot_write(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    writer = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    with running(writer) as url:
        for substore, method, data in history_calls():
            assert store_call(url, substore, method, data).status_code == 200
    app = create_ui_app(StoreStack.of(Routes.single(store)), TokenRegistry.single("ui-token"))
    with running(app) as url, httpx.Client(base_url=url) as client:
        assert client.get("/").headers["location"] == "/ui/"
        assert sign_in(client, token="ui-token").status_code == 303
        agents = client.get("/ui/?format=json").json()["agents"]
        assert [a["agentId"] for a in agents] == [LOGIN_AGENT, DOCS_AGENT]
        # No CallStore endpoint at all: nothing here can change the history.
        refused = client.post(
            CALL_STORE_PATH,
            json={"substore": "agents", "method": "delete", "input": {"filter": {}}},
            headers={"Authorization": "Bearer ui-token"},
        )
        assert refused.status_code in (404, 405)
        assert len(client.get("/ui/?format=json").json()["agents"]) == 2


def test_documents_with_only_the_required_fields_still_render(tmp_path: Path) -> None:
    """The contract requires few fields; pages show what there is, never a 500."""
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as url:
        store_call(
            url, "agents", "create", {"agent": {"agentId": "bare", "cwd": "/", "updatedAt": 5}}
        )
        store_call(
            url, "runs", "create", {"run": {"runId": "r", "agentId": "bare", "turnNumber": 1}}
        )
        for data in (
            {"runId": "r", "eventType": "run_stream_event"},
            {"runId": "r", "eventType": "run_stream_event", "payload": {"type": "sdk_message"}},
            {"runId": "r", "eventType": "note", "payload": [1, "two", None]},
            {
                "runId": "r",
                "eventType": "run_stream_event",
                "payload": {
                    "type": "sdk_message",
                    "message": {"type": "tool_call", "call_id": "c"},
                },
            },
        ):
            store_call(url, "runEvents", "append", data)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for path in (
            "/ui/",
            "/ui/agent?id=bare",
            "/ui/run?agent=bare&id=r",
            "/ui/run?agent=bare&id=r&format=fragment",
            "/ui/events?agent=bare&run=r",
            "/ui/search?q=anything",
            "/ui/export/transcript.md?agent=bare&run=r",
            "/ui/export/agent.jsonl?id=bare",
        ):
            response = httpx.get(url + path, headers=headers)
            assert response.status_code == 200, (path, response.text[-500:])
        page = httpx.get(f"{url}/ui/run?agent=bare&id=r&format=json", headers=headers).json()
        assert [b["kind"] for b in page["blocks"]] == ["other", "other", "other", "tool_call"]


BACKENDS = [
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_page_on_every_backend(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        store = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        store = request.getfixturevalue(f"make_{backend}_url")()
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    with running(app) as url:
        for substore, method, data in history_calls():
            assert store_call(url, substore, method, data).status_code == 200
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, headers=headers) as client:
            agents = client.get("/ui/?format=json").json()["agents"]
            assert [a["agentId"] for a in agents] == [LOGIN_AGENT, DOCS_AGENT]
            page = client.get(f"/ui/agent?id={LOGIN_AGENT}")
            assert page.status_code == 200
            assert page.text.index("Turn 2") < page.text.index("Turn 1")
            transcript = client.get(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
            assert PROMPT in transcript.text
            assert ANSWER in transcript.text
            hits = client.get("/ui/search?q=redirect&format=json").json()["hits"]
            assert [hit["kind"] for hit in hits] == ["user", "tool_call", "assistant"]
            export = client.get(f"/ui/export/agent.jsonl?id={LOGIN_AGENT}")
            assert len(export.text.splitlines()) == 1 + 1 + 17 + 1 + 3


async def write_without_creator(store: str, doc: dict[str, object]) -> None:
    """Straight to the store, as a copy does or as stores from before creators hold it."""
    opened = await open_stores(get_plugin_manager(), Routes.single(store), migrate=True)
    try:
        await opened.stores.agents.create("default", doc)
    finally:
        await opened.close()


def test_creators_show_and_history_from_before_shows_unknown(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    doc = {"agentId": "old", "cwd": "/w", "updatedAt": 1, "name": "from before"}
    asyncio.run(write_without_creator(store, doc))
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with running(app) as url, httpx.Client(base_url=url, headers=headers) as client:
        for substore, method, data in history_calls():
            assert store_call(url, substore, method, data).status_code == 200
        agents = client.get("/ui/?format=json").json()["agents"]
        # The one-token shorthand's name is what its writes record.
        assert {a["agentId"]: a["createdBy"] for a in agents} == {
            LOGIN_AGENT: SHORTHAND_TOKEN_NAME,
            DOCS_AGENT: SHORTHAND_TOKEN_NAME,
            "old": "unknown",
        }
        page = client.get("/ui/").text
        assert '<td class="creator">unknown</td>' in page
        # The one token is no person: the header says whose it is, not its name.
        assert "Signed in with <strong>the server's token</strong>" in page
        assert "Signed in as" not in page
        signed_in = client.get("/ui/?format=json").json()["signedIn"]
        assert signed_in == {"name": SHORTHAND_TOKEN_NAME, "tenant": "default", "serverToken": True}


def test_lone_surrogates_show_as_replacement_characters(tmp_path: Path) -> None:
    """Document bodies may hold lone surrogates (JSON's \\ud800), which have no UTF-8
    form: every page shows each as U+FFFD; the JSON twins carry them escaped."""
    odd = "x\ud800y\udfffz"
    calls = [
        ("agents", "create", {"agent": agent("a", odd, "/", odd, T0)}),
        ("runs", "create", {"run": run("a", "r", 1, odd, model={"id": odd}, error=odd)}),
        (
            "runEvents",
            "append",
            message("a", "r", {"type": "user", "message": {"content": [text(odd)]}}),
        ),
        (
            "runEvents",
            "append",
            message("a", "r", {"type": "tool_call", "call_id": odd, "name": odd}),
        ),
    ]
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with running(app) as url, httpx.Client(base_url=url, headers=headers) as client:
        for substore, method, data in calls:
            body = json.dumps({"substore": substore, "method": method, "input": data})
            assert client.post(CALL_STORE_PATH, content=body).status_code == 200
        for path in (
            "/ui/",
            "/ui/agent?id=a",
            "/ui/runs",
            "/ui/run?agent=a&id=r",
            "/ui/outline?agent=a&id=r",
            "/ui/events?agent=a&run=r",
            "/ui/search?q=x",
            "/ui/export/transcript.md?agent=a&run=r",
        ):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[-300:])
            assert "x\ufffdy\ufffdz" in page.text, path
        assert client.get("/ui/?format=json").json()["agents"][0]["name"] == odd


def test_errors_read_as_text_not_json(browser: httpx.Client) -> None:
    # The failed run's error is an object: its message is what the pages show.
    for path in (f"/ui/agent?id={LOGIN_AGENT}", f"/ui/run?agent={LOGIN_AGENT}&id={FAILED_RUN}"):
        page = browser.get(path).text
        assert "[permission_denied] HTTP 403" in page
        assert "&#34;message&#34;" not in page
        assert '{"message"' not in page


def test_agents_the_sdk_left_unnamed_show_their_first_prompt(browser: httpx.Client) -> None:
    url = str(browser.base_url).rstrip("/")
    prompt = "Rename   the billing\nmodule and update every import of it " + "x" * 80
    for agent_id, name in (("agent-new", "New Agent"), ("agent-blank", " ")):
        doc = agent(agent_id, name, "/src/new", "idle", T0 + 10)
        assert store_call(url, "agents", "create", {"agent": doc}).status_code == 200
    assert (
        store_call(
            url, "runs", "create", {"run": run("agent-new", "run-new", 1, "finished")}
        ).status_code
        == 200
    )
    user = {"type": "user", "message": {"role": "user", "content": [text(prompt)]}}
    for body in ({"type": "status", "status": "RUNNING"}, user):
        assert (
            store_call(
                url, "runEvents", "append", message("agent-new", "run-new", body)
            ).status_code
            == 200
        )
    rows = {a["agentId"]: a for a in browser.get("/ui/?format=json").json()["agents"]}
    shown = rows["agent-new"]["displayName"]
    assert shown.startswith("Rename the billing module and update every import of it xx")
    assert len(shown) == 80
    assert shown.endswith("…")
    assert rows["agent-new"]["name"] == "New Agent"
    assert rows["agent-new"]["lastRun"]["status"] == "finished"
    # Without a run there is no prompt: the stored name stays.
    assert rows["agent-blank"]["displayName"] == " "
    assert rows["agent-blank"]["lastRun"] is None
    # The login agent: its last run failed; its runs' tokens add up.
    assert rows[LOGIN_AGENT]["lastRun"]["status"] == "error"
    assert rows[LOGIN_AGENT]["totalTokens"] == 1556
    page = browser.get("/ui/agent?id=agent-new")
    assert f"<h1>{shown}</h1>" in page.text
    assert "Named by its first prompt" in page.text
    runs = browser.get("/ui/runs?format=json").json()["runs"]
    assert {r["agentName"] for r in runs if r["agentId"] == "agent-new"} == {shown}
