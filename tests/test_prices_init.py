"""``bridge-store prices init``: a price table of the models the store has seen.

Every model of every tenant's runs is listed with its first and last use, its prices
left to fill in; the file reads as written (every model unpriced), any model id is
written so the file still parses (controls, quotes, markup), an existing file is
kept unless ``--force``, and the SQL store's per-day sums and a scan list the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.shares import run_shares
from bridge_store.backend.statistics import DAY_MS
from bridge_store.cli import main
from bridge_store.cli.prices import _scanned
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.pricing.loader import load_prices
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import Routes, open_stores

HOSTILE = 'evil"\n[budgets]\nx = 1 <script>\u202e'
DAY = 20_600


async def fill(url: str) -> None:
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        client = StoreClient(stores=opened.stores, manager=manager)
        writes = [
            ("default", "r1", "composer-2", DAY),
            ("default", "r2", "composer-2", DAY + 30),
            ("team-b", "r3", "gpt-5", DAY + 2),
            ("team-b", "r4", HOSTILE, DAY + 3),
            ("team-b", "r5", None, DAY + 4),
        ]
        for tenant, run_id, model, day in writes:
            who = dataclasses.replace(client, principal=Principal("w", tenant, Scope.WRITE))
            fields: dict[str, Any] = {
                "model": {"id": model} if model else None,
                "startedAt": day * DAY_MS,
            }
            await who.call("runs", "create", {"run": run(run_id, "agent-1", **fields)})
        sums = run_shares(opened.stores.agents, opened.stores.runs)
        assert sums is not None
        # The per-day sums and a read of every run list the same models.
        assert await sums.models_seen() == await _scanned(opened.stores)
    finally:
        await opened.close()


def test_the_template_lists_every_model_unpriced_and_reads_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    asyncio.run(fill(url))
    target = tmp_path / "prices.toml"
    assert main(["prices", "init", "--store", url, "-o", str(target), "--currency", "EUR"]) == 0
    assert capsys.readouterr().err == f"bridge-store: wrote {target}: 3 models, prices to fill in\n"
    text = target.read_text()
    assert "# composer-2: 2 runs, first used 2026-05-27, last used 2026-06-26" in text
    assert "# gpt-5: 1 runs, first used 2026-05-29, last used 2026-05-29" in text
    # The hostile id is one escaped key, in its comment too: nothing it holds is TOML.
    assert '[[models."evil\\"\\n[budgets]\\nx = 1 <script>\\u202e"]]' in text
    assert "\n[budgets]" not in text
    table = load_prices(target)
    assert table.currency == "EUR"
    assert set(table.models) == {"composer-2", "gpt-5", HOSTILE}
    assert all(table.prices(model, DAY) is None for model in table.models)  # unpriced
    assert table.budgets == {}
    # Filled in, a model is priced.
    target.write_text(
        text.replace(
            "[[models.gpt-5]]\n# input = 0.00\n# output = 0.00",
            "[[models.gpt-5]]\ninput = 2\noutput = 8",
        )
    )
    assert load_prices(target).prices("gpt-5", DAY) == (2 * 10**9, 8 * 10**9, 0, 0)


def test_an_existing_file_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    asyncio.run(fill(url))
    target = tmp_path / "prices.toml"
    target.write_text("mine\n")
    assert main(["prices", "init", "--store", url, "-o", str(target)]) == 2
    err = capsys.readouterr().err
    kept = "it is kept (--force replaces it, -o names another file)"
    assert err == f"bridge-store: {target} exists: {kept}\n"
    assert target.read_text() == "mine\n"
    assert main(["prices", "init", "--store", url, "-o", str(target), "--force"]) == 0
    assert "composer-2" in target.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".prices")] == []
    assert main(["prices", "init", "--store", url, "-o", "-"]) == 0
    assert capsys.readouterr().out == target.read_text()
    assert main(["prices", "init", "--store", url, "--currency", "U S"]) == 2
