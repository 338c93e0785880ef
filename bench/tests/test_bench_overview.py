"""bench/overview.py runs end to end at a small size and answers from the index and the scan."""

from __future__ import annotations

import pytest

from bench.overview import main

PAGES = (
    "overview, last 7 days",
    "overview, last 30 days",
    "runs, newest first",
    "runs, costliest first",
    "agents list",
    "agent page",
)


def test_overview_bench_times_every_page_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--runs", "300", "--days", "40", "--scan-runs", "40", "--repeat", "1"]
    assert main([*argv, "--no-postgres"]) == 0
    out = capsys.readouterr().out
    assert "sqlite (index): " in out
    assert "memory (scan): " in out
    assert " USD; " in out
    timed = [line.split(" median ")[0].strip() for line in out.splitlines() if " median " in line]
    for page in PAGES:
        assert timed.count(page) == 2, page
