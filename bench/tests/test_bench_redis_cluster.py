"""``python -m bench redis-cluster`` runs end to end on its private servers (few appends)."""

from __future__ import annotations

import re

import pytest

from bench import redis_cluster

pytestmark = pytest.mark.redis


def test_the_bench_measures_three_targets_and_the_spread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert redis_cluster.main(["--appends", "640"]) == 0
    out = capsys.readouterr().out
    for target in ("standalone:", "cluster:", "cluster, wait_replicas=1:"):
        assert f"\n{target}\n" in f"\n{out}"
    assert len(re.findall(r"append one at a time: p50 [\d.]+ ms, p99 [\d.]+ ms", out)) == 3
    assert len(re.findall(r"64 in flight over 64 runs: [\d,]+/s", out)) == 3
    spread = re.search(r"logs of its 65 runs per primary: \[(\d+), (\d+), (\d+)\]", out)
    assert spread is not None
    counts = [int(n) for n in spread.groups()]
    assert sum(counts) == 65
    assert min(counts) > 0
