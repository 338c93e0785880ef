"""bench/e2e.py's split of a turn's extra time between the server and the bridge."""

from __future__ import annotations

import pytest

from bench.e2e import ServerTime, Timing, summarize


def test_the_server_share_is_its_time_per_turn_over_the_extra_per_turn() -> None:
    timings = [
        Timing("bridge-store", 100.0, [30.0, 50.0], 0, ServerTime(calls=44, seconds=0.020)),
        Timing("builtin", 90.0, [10.0, 10.0], 0),
        Timing("bridge-store", 100.0, [40.0, 40.0], 0, ServerTime(calls=44, seconds=0.012)),
        Timing("builtin", 90.0, [12.0, 8.0], 0),
    ]
    summary = summarize(timings)
    ours = summary["bridge-store"]
    # Means per turn: 40 ms against 10 ms; the server spent 32 ms over four turns.
    assert ours["mean_turn_ms"] == 40.0
    assert summary["builtin"]["mean_turn_ms"] == 10.0
    assert ours["extra_ms_per_turn"] == 30.0
    assert ours["server_calls_per_turn"] == 22.0
    assert ours["server_ms_per_turn"] == pytest.approx(8.0)
    assert ours["server_share_of_extra"] == pytest.approx(8.0 / 30.0)
    assert ours["client_ms_per_turn"] == pytest.approx(22.0)
    assert "server_ms_per_turn" not in summary["builtin"]
