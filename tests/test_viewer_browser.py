"""The viewer in a real browser: Playwright driving Debian's Chromium.

Sign in, filter and page the agents, open a transcript, expand a tool card and show
all of its result, move through the transcript with the keyboard, follow a live run
while events are appended, load a long run on scroll, search, export, and read it on
a phone-sized screen, on one worker and on ``serve --workers 2``. Every page is
checked with axe-core (WCAG 2 A and AA: landmarks, labels, contrast...). Screenshots
of the agents page and a transcript are saved to ``test-artifacts/viewer/``
(``$BRIDGE_STORE_TEST_ARTIFACTS`` to move them).

``scripts/ensure-browser`` installs Chromium and axe-core when they are missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.queries import DEFAULT_EVENTS_PAGE as PAGE_EVENTS
from bridge_store.viewer.transcript import build
from testkit.inprocess import running
from tests.support.server import serve

from .support.history import (
    DOCS_AGENT,
    FINISHED_RUN,
    LIVE_RUN,
    LOGIN_AGENT,
    LONG_RESULT_LINES,
    T0,
    agent,
    history_calls,
    live_run_ending,
    message,
    run,
)
from .support.sample import sample
from .test_viewer_transcript import stored

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "browser-test-token"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
CACHE = Path(
    os.environ.get("BRIDGE_STORE_TEST_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bridge-store"
)
AXE = CACHE / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = (
    Path(os.environ.get("BRIDGE_STORE_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "viewer"
)
FILLER_AGENTS = 24
LONG_RUN = "run-long"
#: The long run is the demo sample's (bridge_store.demo): a test suite moved file by
#: file, 3,499 streamed messages, replayed here as a run of the login agent.
LONG_STORY = "Move the test suite to Vitest"
#: Upper bound for things the page does on its own (a poll, a scroll load); they take
#: about a second. Only a broken page ever waits this long.
UI_TIMEOUT_MS = 20_000
expect.set_options(timeout=UI_TIMEOUT_MS)


def store_call(url: str, substore: str, method: str, data: Any) -> None:
    with httpx.Client() as http:
        store_call_on(http, url, substore, method, data)


def store_call_on(http: httpx.Client, url: str, substore: str, method: str, data: Any) -> None:
    """One CallStore call on ``http``'s connections (a new client costs ~0.1 s)."""
    response = http.post(
        url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200, response.text


@contextmanager
def serving(workers: int, directory: Path) -> Iterator[str]:
    """The server's URL (no trailing slash): one worker in this process, or ``serve
    --workers N`` on SQLite, where each page, poll and export may land on any worker."""
    if workers == 1:
        app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
        with running(app) as url:
            yield url
        return
    store = f"sqlite:///{directory / 'store.db'}"
    with serve("--store", store, "--workers", str(workers), token=TOKEN) as server:
        yield server.url.rstrip("/")


@pytest.fixture(scope="module", params=[1, 2], ids=["one-worker", "two-workers"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with serving(request.param, tmp_path_factory.mktemp("viewer-browser")) as url:
        with httpx.Client(timeout=30) as http:
            for substore, method, data in history_calls():
                store_call_on(http, url, substore, method, data)
            for n in range(FILLER_AGENTS):
                name, cwd = f"filler {n:02}", "/src/other"
                doc = agent(f"agent-filler-{n:02}", name, cwd, "idle", T0 - n)
                store_call_on(http, url, "agents", "create", {"agent": doc})
            long_run = run(LOGIN_AGENT, LONG_RUN, 3, "finished")
            store_call_on(http, url, "runs", "create", {"run": long_run})
            for body in long_run_messages():
                event = message(LOGIN_AGENT, LONG_RUN, body)
                store_call_on(http, url, "runEvents", "append", event)
        yield url


def long_run_messages() -> list[dict[str, Any]]:
    """The sample's long run, as the messages its events carry (without their ids)."""
    (long_run,) = sample().agent(LONG_STORY).runs
    return [
        {k: v for k, v in event["payload"]["message"].items() if k not in ("agent_id", "run_id")}
        for event in long_run.events
    ]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    subprocess.run([str(ROOT / "scripts" / "ensure-browser")], check=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def new_context(browser: Browser, server: str, **options: Any) -> BrowserContext:
    """A browser context whose every request opens a new connection, as a browser's do
    once its idle ones have closed: under two workers any page, poll, script or export
    may land on either (kept-alive, a quick test would stay on one)."""
    return browser.new_context(
        base_url=server, extra_http_headers={"Connection": "close"}, **options
    )


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    context = new_context(browser, server, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(UI_TIMEOUT_MS)
    tab = context.new_page()
    tab.goto("/ui/")
    tab.get_by_label("Store token").fill(TOKEN)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("heading", name="Agents")).to_be_visible()
    yield tab
    context.close()


def accessibility_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's WCAG 2 A/AA violations on the page as it is now."""
    # Evaluated rather than added as a script tag: the pages' CSP (rightly) refuses
    # scripts from anywhere but the viewer, and the tests run under it.
    page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
    tags = ["wcag2a", "wcag2aa", "best-practice"]
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", tags
    )
    return [
        {"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]} for v in result["violations"]
    ]


def assert_accessible(page: Page) -> None:
    assert accessibility_violations(page) == []
    for role in ("banner", "main", "contentinfo"):
        expect(page.get_by_role(role)).to_have_count(1)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_sign_in_is_accessible_and_required(browser: Browser, server: str) -> None:
    context = new_context(browser, server)
    tab = context.new_page()
    tab.goto(f"/ui/agent?id={LOGIN_AGENT}")
    expect(tab).to_have_url(f"{server}/ui/sign-in?next=%2Fui%2Fagent%3Fid%3D{LOGIN_AGENT}")
    assert_accessible(tab)
    tab.get_by_label("Store token").fill("wrong")
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("alert")).to_have_text("That token is not valid here.")
    tab.get_by_label("Store token").fill(TOKEN)
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("heading", level=1)).to_have_text("fix login")
    tab.get_by_role("button", name="Sign out").click()
    expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
    tab.goto("/ui/")
    expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
    context.close()


def test_filter_and_page_the_agents(page: Page, server: str) -> None:
    assert_accessible(page)
    screenshot(page, "agents.png")
    rows = page.locator("table.agents tbody tr")
    expect(rows.first).to_contain_text("fix login")
    expect(page.get_by_text("old spike")).to_have_count(0)  # archived: hidden

    page.goto("/ui/?limit=10")
    expect(rows).to_have_count(10)
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(10)
    expect(rows.first).to_contain_text("filler 08")
    assert "cursor=" in page.url
    assert "limit=10" in page.url
    page.go_back()
    expect(rows.first).to_contain_text("fix login")

    # A filter the store cannot apply reads on through store pages until a page fills.
    page.goto("/ui/?limit=5")
    page.get_by_label("Name contains").fill("filler 1")
    page.get_by_label("Status").select_option("idle")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(5)
    expect(rows.first).to_contain_text("filler 10")
    assert "name=filler+1" in page.url
    assert "status=idle" in page.url
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(5)
    expect(rows.first).to_contain_text("filler 15")
    expect(rows.last).to_contain_text("filler 19")
    expect(page.get_by_label("Name contains")).to_have_value("filler 1")
    page.go_back()
    expect(rows.first).to_contain_text("filler 10")
    page.get_by_label("Name contains").fill("")
    page.get_by_label("Status").select_option("")
    page.get_by_label("Show archived").check()
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("old spike")).to_be_visible()


def test_read_a_transcript_with_mouse_and_keyboard(page: Page) -> None:
    page.get_by_role("link", name="fix login").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("fix login")
    assert_accessible(page)
    page.get_by_role("link", name="Turn 1").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("fix login: turn 1")
    transcript = page.locator("#transcript")
    expect(transcript).to_contain_text("Fix the login redirect")
    expect(transcript).to_contain_text("I'll read the router.")
    expect(page.locator(".usage-table")).to_contain_text("1,556")

    card = page.locator('[data-key="call-call-read"]')
    expect(card.locator("summary")).to_contain_text("read_file")
    expect(card.locator("summary")).to_contain_text("completed")
    expect(card.locator("details")).not_to_have_attribute("open", "")
    card.locator("summary").click()
    result = card.locator('[data-part="result"] pre')
    expect(result).to_be_visible()
    last_line = f"line {LONG_RESULT_LINES - 1} of routes/login.py"
    expect(result).not_to_contain_text(last_line)  # a preview until asked
    card.get_by_role("link", name="Show all").click()
    expect(result).to_contain_text(last_line)
    screenshot(page, "transcript.png")
    assert_accessible(page)

    # Keyboard: j and k move between blocks, Enter opens the focused card.
    page.locator("main h1").click()
    blocks = page.locator("#transcript > .block")
    for _ in range(3):
        page.keyboard.press("j")
    expect(blocks.nth(2)).to_be_focused()
    page.keyboard.press("k")
    expect(blocks.nth(1)).to_be_focused()
    test_card = page.locator('[data-key="call-call-test"]')
    while not test_card.evaluate("el => el === document.activeElement"):
        page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(test_card.locator("details")).to_have_attribute("open", "")
    expect(test_card).to_contain_text("1 failed: test_redirect_keeps_next")
    # Tab reaches the cards' summaries, which open with the keyboard as well.
    thinking = page.locator(".block.thinking summary")
    thinking.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".block.thinking details")).to_have_attribute("open", "")
    expect(page.locator(".block.thinking")).to_contain_text("Looking at the router first.")


def test_follow_a_live_run_without_reloading(page: Page, server: str) -> None:
    page.goto(f"/ui/run?agent={DOCS_AGENT}&id={LIVE_RUN}")
    expect(page.locator("#run-status")).to_have_text("running")
    expect(page.locator("#live")).to_contain_text("still going")
    page.evaluate("window.__same_page = true")
    for substore, method, data in live_run_ending():
        store_call(server, substore, method, data)
    expect(page.locator("#transcript")).to_contain_text("The CLI has five commands.")
    expect(page.locator("#run-status")).to_have_text("finished")
    expect(page.locator("#live")).to_have_text("This run has ended.")
    assert page.evaluate("window.__same_page") is True


def test_a_long_run_loads_more_as_it_is_read(page: Page) -> None:
    messages = long_run_messages()
    page.goto(f"/ui/run?agent={LOGIN_AGENT}&id={LONG_RUN}")
    blocks = page.locator("#transcript > .block")
    # Each page of 200 events shows what the transcript of those events holds: a text
    # cut by the page boundary and a tool call whose result comes later are joined.
    expect(blocks).to_have_count(len(build(stored(messages[:PAGE_EVENTS])).blocks))
    # Reading to the end of what is shown loads the next page of events, to the end.
    for loaded in range(2 * PAGE_EVENTS, len(messages) + PAGE_EVENTS, PAGE_EVENTS):
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        expect(blocks).to_have_count(len(build(stored(messages[:loaded])).blocks))
    expect(page.get_by_role("link", name="Load more events")).to_have_count(0)
    expect(blocks.last).to_contain_text("FINISHED")
    expect(blocks.nth(-4)).to_contain_text("All 200 spec files run on Vitest now.")


def test_search_and_export(page: Page, tmp_path: Path) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Search").click()
    page.get_by_label("Words in agent names, prompts, answers, tool calls and errors").fill(
        "redirect"
    )
    page.keyboard.press("Enter")
    hits = page.locator("ol.hits li")
    expect(hits).to_have_count(3)
    expect(hits.first).to_contain_text("Fix the login redirect")
    assert_accessible(page)
    hits.first.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("fix login: turn 1")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export run (JSON lines)").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert lines[0]["run"]["runId"] == FINISHED_RUN
    assert [line["event"]["seq"] for line in lines[1:]] == list(range(1, len(lines)))

    with page.expect_download() as download:
        page.get_by_role("link", name="Export transcript (Markdown)").click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == f"transcript-{FINISHED_RUN}.md"
    assert saved.read_text().startswith("# fix login: turn 1")


def test_readable_on_a_phone(browser: Browser, server: str) -> None:
    context = new_context(
        browser, server, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    tab = context.new_page()
    tab.goto("/ui/sign-in")
    tab.get_by_label("Store token").fill(TOKEN)
    tab.get_by_role("button", name="Sign in").click()
    for path in ("/ui/", f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}"):
        tab.goto(path)
        # Nothing wider than the screen: long ids and paths wrap, tables scroll inside.
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, path
    screenshot(tab, "transcript-phone.png")
    assert accessibility_violations(tab) == []
    context.close()
