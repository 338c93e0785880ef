"""bench/import_local.py runs end to end on a small store: imports all, then nothing new."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.import_local import main

pytestmark = [pytest.mark.bridge, pytest.mark.slow]


def test_import_local_bench_imports_everything_then_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'bench.db'}"
    counts = ["--agents", "3", "--runs", "2", "--events", "4", "--blob-kib", "1"]
    assert main(["--store", store, *counts]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("built-in store: 4 agents, 7 runs, 27 events, 3 blobs of 1 KiB")
    # 3 clones of (agent, 2 runs, 8 events, a blob) and the real agent, run and 3 events.
    assert lines[1].endswith("| imported 41, already present 0, different 0, replaced 0")
    assert lines[2].endswith("| imported 0, already present 41, different 0, replaced 0")
