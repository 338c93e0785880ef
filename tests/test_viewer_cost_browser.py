"""The overview's charts and costs in Chromium (Playwright), on SQLite and Postgres.

Each chart's bars carry the numbers of the page's JSON twin (``?format=json``), bar by
bar, and those are the by-day table's; every chart has a title, a text alternative and
its numbers; axe-core finds no WCAG 2 A/AA violation on the overview in the light and
the dark scheme; on a phone's width the charts fit the screen. The runs list shows
each run's cost and sorts by it, and the agents list's sparklines draw the JSON's
activity.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bridge_store.pricing.book import PriceBook
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running

from .support.history import history_calls
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

PRICES = '[models."composer-2"]\ninput = 1000\noutput = 2000\n[budgets]\nteam-a = 5\n'
OVERVIEW = "/ui/overview?days=30&to=2026-05-28"
Scheme = Literal["light", "dark"]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("costs")
    if request.param == "sqlite":
        url = f"sqlite:///{directory / 'store.db'}"
    else:
        url = request.getfixturevalue("make_postgres_url")()
    prices = directory / "prices.toml"
    prices.write_text(PRICES)
    config = ServerConfig(
        routes=Routes.single(url), tokens=registry(), prices=PriceBook.read(prices)
    )
    with running(create_app(config)) as base:
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


def signed_in(browser: Browser, server: str, scheme: Scheme = "light", width: int = 1280) -> Page:
    context = browser.new_context(
        base_url=server, viewport={"width": width, "height": 900}, color_scheme=scheme
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


def twin(page: Page, path: str) -> dict[str, Any]:
    """The page's JSON twin, fetched with the page's own session."""
    response = page.request.get(path + ("&" if "?" in path else "?") + "format=json")
    assert response.ok, response.text()
    found: dict[str, Any] = response.json()
    return found


def shown(value: Any) -> str:
    return "" if value is None else str(value)


def test_each_chart_draws_the_numbers_of_the_json_twin(page: Page) -> None:
    page.goto(OVERVIEW)
    data = twin(page, OVERVIEW)
    charts = data["charts"]
    assert [chart["id"] for chart in charts] == ["runs", "tokens", "cost", "p95", "models"]
    figures = page.locator("figure.chart")
    expect(figures).to_have_count(len(charts))
    for chart in charts:
        figure = page.locator(f"figure[data-chart='{chart['id']}']")
        svg = figure.locator("svg[role='img']")
        # A title and a one-sentence text alternative, named by the image.
        assert svg.locator(f"#chart-{chart['id']}-svg-title").text_content() == chart["title"]
        assert svg.locator("desc").text_content() == chart["summary"]
        for n, series in enumerate(chart["series"]):
            selector = "rect.bar" if chart.get("horizontal") else f"rect[data-series='{n}']"
            drawn = svg.locator(selector).evaluate_all("bars => bars.map(b => b.dataset.value)")
            assert drawn == [shown(value) for value in series["values"]], chart["id"]
            labels = svg.locator(selector).evaluate_all("bars => bars.map(b => b.dataset.label)")
            assert labels == chart["labels"]
        # The numbers beside it: one row per label.
        expect(figure.locator("details.numbers tbody tr")).to_have_count(len(chart["labels"]))
    # The runs chart is the by-day table's runs and failures, oldest day first.
    days = list(reversed(data["windows"]["30"]["byDay"]))
    runs = next(chart for chart in charts if chart["id"] == "runs")
    assert runs["series"][0]["values"] == [day["runs"] for day in days]
    assert runs["series"][1]["values"] == [day["failed"] for day in days]
    cost = next(chart for chart in charts if chart["id"] == "cost")
    assert cost["series"][0]["values"] == [day["cost"] for day in days]
    assert sum(runs["series"][0]["values"]) == 3
    # Who spent what, and the budget (team-a: 5 USD a month).
    expect(page.get_by_role("heading", name="By agent")).to_be_visible()
    expect(page.locator("table.by-creator")).to_contain_text("a-writer")
    expect(page.locator("section.budget")).to_contain_text("of 5.00 USD spent")
    assert data["budget"]["budget"] == "5.000000"
    assert "b-writer" not in page.content()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_overview_is_accessible_in_both_schemes(
    browser: Browser, server: str, scheme: Scheme
) -> None:
    tab = signed_in(browser, server, scheme)
    tab.goto(OVERVIEW)
    expect(tab.locator("figure.chart").first).to_be_visible()
    assert accessibility_violations(tab) == [], scheme
    # The bars take the scheme's palette: CSS variables, no colour written in the SVG.
    fill = tab.locator("figure[data-chart='runs'] rect.series-0").first.evaluate(
        "bar => getComputedStyle(bar).fill"
    )
    assert fill == ("rgb(68, 147, 248)" if scheme == "dark" else "rgb(9, 105, 218)")
    screenshot(tab, f"overview-{scheme}.png")
    tab.context.close()


def test_on_a_phone_the_charts_fit_the_screen(browser: Browser, server: str) -> None:
    tab = signed_in(browser, server, width=390)
    tab.goto(OVERVIEW)
    widths = tab.locator("figure.chart svg").evaluate_all(
        "svgs => svgs.map(s => s.getBoundingClientRect().right)"
    )
    assert widths
    assert max(widths) <= 390
    screenshot(tab, "overview-phone.png")
    tab.context.close()


def test_runs_show_their_cost_and_sort_by_it_and_agents_their_activity(page: Page) -> None:
    page.goto("/ui/runs")
    page.get_by_role("link", name="Cost").click()
    assert "sort=cost" in page.url
    data = twin(page, "/ui/runs?sort=cost")
    costs = [row["cost"] for row in data["runs"]]
    priced = [float(cost) for cost in costs if cost is not None]
    assert priced == sorted(priced, reverse=True)
    assert priced
    rows = page.locator("table.all-runs tbody tr")
    expect(rows.first).to_contain_text("USD")
    assert accessibility_violations(page) == []
    page.goto("/ui/")
    agents = twin(page, "/ui/")["agents"]
    drawn = page.locator("svg.spark").evaluate_all("s => s.map(x => x.dataset.values)")
    assert drawn == [",".join(map(str, agent["activity"])) for agent in agents]
