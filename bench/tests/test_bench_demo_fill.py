"""bench/demo_fill.py runs end to end on memory and reports the sample it wrote."""

from __future__ import annotations

import pytest

from bench.demo_fill import main
from bridge_store.demo.history import sample_history


def test_demo_fill_writes_the_whole_sample_and_says_how_fast(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--store", "memory://", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert f"({sample_history().events:,} events, " in out
    assert "(target 5 s)" in out
