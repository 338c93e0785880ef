"""The team lead's pages in Chromium (Playwright), on SQLite and Postgres.

Who is signed in and who started each agent and run, dark mode following the
browser's preference, every page checked by axe-core (WCAG 2 A and AA) in both
colour schemes. Two tenants share each server: team B's names never show to team A.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Literal

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bridge_store.demo.team import PEOPLE
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .support.history import DOCS_AGENT, FINISHED_RUN, LOGIN_AGENT, T0, history_calls, message, run
from .support.sample import sample, write_sample
from .test_viewer_browser import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    ROOT,
    UI_TIMEOUT_MS,
    accessibility_violations,
    screenshot,
)
from .test_viewer_tenants import READ_A, WRITE_A, WRITE_B, registry, store, team_b_calls

pytestmark = pytest.mark.slow
expect.set_options(timeout=UI_TIMEOUT_MS)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('team') / 'store.db'}"
    else:
        url = request.getfixturevalue("make_postgres_url")()
    app = create_app(ServerConfig(routes=Routes.single(url), tokens=registry()))
    with running(app) as base:
        store(base, WRITE_A, history_calls())
        store(base, WRITE_B, team_b_calls())
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    subprocess.run([str(ROOT / "scripts" / "ensure-browser")], check=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


Scheme = Literal["light", "dark"]


def signed_in(browser: Browser, server: str, scheme: Scheme = "light") -> Page:
    context = browser.new_context(
        base_url=server, viewport={"width": 1280, "height": 900}, color_scheme=scheme
    )
    context.set_default_timeout(UI_TIMEOUT_MS)
    tab = context.new_page()
    tab.goto("/ui/sign-in")
    tab.get_by_label("Store token").fill(READ_A)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("heading", name="Agents")).to_be_visible()
    return tab


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    tab = signed_in(browser, server)
    yield tab
    tab.context.close()


def test_every_page_says_who_is_signed_in_and_who_started_what(page: Page) -> None:
    banner = page.get_by_role("banner")
    expect(banner).to_contain_text("Signed in as a-reader")
    expect(banner).to_contain_text("tenant team-a")
    rows = page.locator("table.agents tbody tr")
    expect(rows.first.locator("td.creator")).to_have_text("a-writer")
    # Each agent's last run and the tokens of all its runs.
    expect(rows.first).to_contain_text("error")
    expect(rows.first.locator("td.num")).to_have_text("1,556")
    page.get_by_role("link", name="fix login").click()
    expect(page.locator("table.runs td.creator").first).to_have_text("a-writer")
    page.get_by_role("link", name="Turn 1").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("turn 1")
    expect(page.locator("dd.creator")).to_have_text("a-writer")
    expect(page.get_by_role("banner")).to_contain_text("Signed in as a-reader")
    assert "b-writer" not in page.content()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_colour_scheme_follows_the_browser_and_stays_readable(
    browser: Browser, server: str, scheme: Scheme
) -> None:
    tab = signed_in(browser, server, scheme)
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = background == "rgb(13, 17, 23)"
    assert dark == (scheme == "dark"), background
    for path in (
        "/ui/",
        f"/ui/agent?id={LOGIN_AGENT}",
        f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}",
    ):
        tab.goto(path)
        assert accessibility_violations(tab) == [], (scheme, path)
    screenshot(tab, f"transcript-{scheme}.png")
    tab.context.close()


def test_runs_of_every_agent_filtered_sorted_paged_and_linked(page: Page) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    rows = page.locator("table.all-runs tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("error")
    assert accessibility_violations(page) == []
    screenshot(page, "runs.png")
    # Longest first, from the column header; the order stays while filtering.
    page.get_by_role("link", name="Duration").click()
    expect(rows.first).to_contain_text("1 min 23 s")
    page.get_by_label("Status").select_option("finished")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    assert "sort=duration" in page.url
    assert "status=finished" in page.url
    page.get_by_label("Status").select_option("")
    page.get_by_label("Started by").fill("a-writer")
    page.get_by_label("Directory").fill("/src/docs")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("write docs")
    # Paging with the store's cursors keeps the filters.
    page.goto("/ui/runs?limit=2")
    expect(rows).to_have_count(2)
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(1)
    assert "limit=2" in page.url
    rows.first.get_by_role("link", name="Turn 1").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("turn 1")
    assert "quokka" not in page.content()


def test_the_overview_of_the_last_days_and_its_links(page: Page) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    page.get_by_label("Ending on (UTC)").fill("2026-05-28")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("heading", name="By day, 2026-05-22 to 2026-05-28")).to_be_visible()
    days = page.locator("table.by-day tbody tr")
    expect(days).to_have_count(7)
    expect(days.first).to_contain_text("2026-05-28")
    expect(page.locator("table.by-model tbody tr").first).to_contain_text("composer-2")
    expect(page.locator("ol.tools").first).to_contain_text("read_file")
    assert accessibility_violations(page) == []
    screenshot(page, "overview.png")
    page.get_by_role("link", name="Last 30 days").click()
    expect(days).to_have_count(30)
    assert "days=30" in page.url
    # A day's failed runs are one click away.
    days.first.get_by_role("link", name="1", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    expect(page.locator("table.all-runs tbody tr")).to_have_count(1)
    assert "status=error" in page.url


def test_following_a_live_run_keeps_its_header_current(page: Page, server: str) -> None:
    follow = run(DOCS_AGENT, "run-follow", 2, "running", startedAt=T0)
    store(server, WRITE_A, [("runs", "create", {"run": follow})])
    page.goto(f"/ui/run?agent={DOCS_AGENT}&id=run-follow")
    expect(page.locator("#run-duration")).to_contain_text("so far")
    expect(page.locator("#usage-body")).to_contain_text("Not reported yet")
    usage = {"type": "usage", "usage": {"inputTokens": 42, "outputTokens": 8}}
    ended = {**follow, "status": "finished", "endedAt": T0 + 95_000}
    store(
        server,
        WRITE_A,
        [
            ("runEvents", "append", message(DOCS_AGENT, "run-follow", usage)),
            ("runs", "update", {"run": ended}),
        ],
    )
    expect(page.locator("#run-status")).to_have_text("finished")
    expect(page.locator("#run-duration")).to_have_text("1 min 35 s")
    expect(page.locator("#usage-body table")).to_contain_text("42")
    # Every block says when it happened, and links to itself.
    stamp = page.locator("#transcript .at").first
    expect(stamp).to_be_visible()
    assert (stamp.get_attribute("href") or "").startswith("#b-")
    assert accessibility_violations(page) == []


def test_the_outline_jumps_to_the_first_error_and_the_end(page: Page) -> None:
    page.goto(f"/ui/run?agent={LOGIN_AGENT}&id={FINISHED_RUN}")
    page.get_by_role("link", name="Outline: every step, first error, end").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Outline of turn 1")
    expect(page.locator("ol.outline li.failed")).to_contain_text("run_terminal_cmd (error")
    assert accessibility_violations(page) == []
    page.get_by_role("navigation", name="Jumps").get_by_role("link", name="First error").click()
    target = page.locator(".block:target")
    expect(target).to_contain_text("run_terminal_cmd")
    page.go_back()
    page.get_by_role("navigation", name="Jumps").get_by_role("link", name="End").click()
    expect(page.locator(".block:target")).to_contain_text("FINISHED")


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo's sample team history (bridge_store.demo), served with a token per person."""
    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'sample.db'}"
    write_sample(url)
    tokens = TokenRegistry(
        [
            TokenEntry(name, token_digest(f"{name}-demo-token"), tenant, Scope.READ)
            for name, tenant in PEOPLE.items()
        ]
    )
    with running(create_app(ServerConfig(routes=Routes.single(url), tokens=tokens))) as base:
        yield base


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_demo_s_history_reads_well_and_is_accessible(
    browser: Browser, demo_server: str, scheme: Scheme
) -> None:
    # A realistic team's pages: a failed run's error, a cancelled run, tool cards that
    # failed, a run of 3,500 events, the overview and the runs of every agent.
    context = browser.new_context(
        base_url=demo_server, viewport={"width": 1280, "height": 900}, color_scheme=scheme
    )
    context.set_default_timeout(UI_TIMEOUT_MS)
    tab = context.new_page()
    tab.goto("/ui/sign-in")
    tab.get_by_label("Store token").fill("bob-demo-token")
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("banner")).to_contain_text("Signed in as bob")
    flaky = sample().agent("Flaky checkout test")
    failed, cancelled = flaky.runs[1], sample().agent("Dark mode toggle").runs[0]
    paths = {
        "/ui/": "Release notes for 2.4",
        f"/ui/agent?id={flaky.agent_id}": "Flaky checkout test",
        f"/ui/run?agent={flaky.agent_id}&id={failed.document['runId']}": "[resource_exhausted]",
        f"/ui/run?agent={cancelled.document['agentId']}&id={cancelled.document['runId']}": (
            "CANCELLED"
        ),
        "/ui/runs": "Move the test suite to Vitest",
        "/ui/overview?days=30&to=2027-01-15": "claude-4.5-sonnet",
    }
    for path, shown in paths.items():
        tab.goto(path)
        expect(tab.locator("main")).to_contain_text(shown)
        assert accessibility_violations(tab) == [], (scheme, path)
        assert "dana" not in tab.content()
    screenshot(tab, f"demo-overview-{scheme}.png")
    context.close()
