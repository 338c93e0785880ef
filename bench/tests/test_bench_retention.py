"""bench/retention.py runs end to end on a small memory store and reports what it pruned."""

from __future__ import annotations

import pytest

from bench.retention import main


def test_retention_bench_prunes_half_and_collects_the_orphans(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--store", "memory://", "--agents", "6", "--events", "3", "--orphans", "2"]) == 0
    line = capsys.readouterr().out
    assert "3 agents, 12 runs, 36 events, 6 blobs" in line
    assert "(2 orphaned logs of 14 runs)" in line
