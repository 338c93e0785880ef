"""bench/copy.py runs end to end on a small store and reports both copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.copy import main


def test_copy_bench_copies_then_finds_everything_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"sqlite:///{tmp_path / 'target.db'}"
    arguments = ["--to", target, "--agents", "3", "--runs", "2", "--events", "5"]
    assert main([*arguments, "--blob-kib", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("source: 3 agents, 6 runs, 30 events, 3 blobs of 4 KiB")
    assert out[1].startswith("first ")
    assert "runEvents 30 (30 created)" in out[1]
    assert out[2].startswith("again ")
    assert "runEvents 30 (30 same)" in out[2]
    assert "verified: both stores hold the same history" in out[2]
