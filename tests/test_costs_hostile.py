"""Every value CallStore accepts, through the costs: the pages answer, in valid JSON.

Times in microseconds, at 2^53 and negative, token counts at 2^53 and negative, model
ids with markup, controls and bidi characters, priced by a table that names them: the
overview, the runs list costliest first (paged to the end) and the agent page answer
on SQLite and on the scan, their JSON is JSON (no float, no Infinity), and the
overview's HTML shows the markup as text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from starlette.datastructures import QueryParams

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.pricing.book import PriceBook
from bridge_store.pricing.loader import toml_key
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer import pages, templating
from bridge_store.wire.fields import MAX_SAFE_INTEGER

from .test_costs import context_of, writer

MARKUP = '<img src=x onerror="alert(1)">\u202e\x1b[31m'
TIMES = [
    -MAX_SAFE_INTEGER,
    -1,
    0,
    1_780_000_000_000,
    1_780_000_000_000_000,  # microseconds by mistake
    MAX_SAFE_INTEGER,
]


@pytest.fixture(params=["sqlite", "memory"])
async def opened(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStores]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    stores = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    client = StoreClient(stores=stores.stores, manager=get_plugin_manager(), principal=writer("x"))
    agent = {"agentId": "agent-1", "cwd": "/w", "status": "idle", "createdAt": 1, "updatedAt": 1}
    await client.call("agents", "create", {"agent": {**agent, "name": MARKUP}})
    for n, at in enumerate(TIMES):
        for model, tokens in ((MARKUP, MAX_SAFE_INTEGER), ("m", -MAX_SAFE_INTEGER)):
            fields = {
                "model": {"id": model},
                "startedAt": at,
                "endedAt": MAX_SAFE_INTEGER,
                "status": "error",
                "usage": {"inputTokens": tokens, "outputTokens": tokens, "cacheReadTokens": 7},
            }
            await client.call(
                "runs",
                "create",
                {"run": run(f"run-{n}-{model == 'm'}", "agent-1", turn_number=n + 1, **fields)},
            )
    try:
        yield stores
    finally:
        await stores.close()


async def test_every_page_answers_in_json_and_escapes_in_html(
    opened: OpenStores, tmp_path: Path
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        f"[models.{toml_key(MARKUP)}]\ninput = 1000000000\noutput = 1000000000\n"
        "[models.m]\ninput = 0.000000001\noutput = 3\n[budgets]\nteam-a = 1\n"
    )
    context = context_of(opened, PriceBook.read(path))
    views = [
        await pages.overview(context, QueryParams({"days": "30", "to": "2026-05-28"})),
        await pages.overview(context, QueryParams({"days": "7"})),
        await pages.runs(context, QueryParams({"sort": "cost"})),
        await pages.runs(context, QueryParams({"sort": "cost", "limit": "2"})),
        await pages.agent(context, QueryParams({"id": "agent-1"})),
    ]
    for view in views:
        text = json.dumps(view.data, allow_nan=False)  # JSON, no float beyond 2^53
        assert "Infinity" not in text
        if view.template != "overview.html":
            # The runs and agent pages show each run's time with the viewer's time
            # filter, whose out-of-range times are the readers' work (issue 37).
            continue
        html = templating.render_page(
            view.template, title=view.title, data=view.data, base="/ui", csrf="x"
        )
        assert "<img src=x" not in html
        # The model of 2026-05-28 is shown, as text.
        assert ("&lt;img src=x" in html) == (view is views[0])
    runs = views[2].data["runs"]
    costs = [row["cost"] for row in runs]
    assert len(runs) == len(TIMES) * 2
    # Costliest first; exact decimal text however large.
    assert costs[0] is not None
    assert costs[0].endswith(".000000")
    month = views[0].data["windows"]["30"]
    assert month["total"]["runs"] == 2  # the two runs of 2026-05-28
    # Paging costliest first neither repeats nor skips a run.
    seen: list[str] = []
    cursor = None
    while True:
        params = {"sort": "cost", "limit": "3", **({"cursor": cursor} if cursor else {})}
        page = (await pages.runs(context, QueryParams(params))).data
        seen += [row["runId"] for row in page["runs"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(row["runId"] for row in runs)
