"""bench/export_runs.py's mix: the realistic one, every runs.update ending its run."""

from __future__ import annotations

import pytest

from bench import mix
from bench.export_runs import _arguments


def test_the_ending_mix_is_the_realistic_one_with_runs_ended() -> None:
    realistic = {(op.name, op.weight) for op in mix.operations("realistic")}
    ending = mix.operations("ending")
    assert {(op.name, op.weight) for op in ending} == realistic
    (update,) = [op for op in ending if op.name == "runs.update"]
    world = mix.build_world(active_runs=2)
    record = world.active["timed"][0]
    run = mix.render(update, record, counter=5)["input"]["run"]
    assert run["status"] == "finished"
    assert run["endedAt"] == run["updatedAt"] == mix.BASE_MS + 1_000_000 + 5
    assert (run["runId"], run["agentId"]) == (record["RUN"], record["AGENT"])
    assert mix.check_output(update, record, world, {**run}) is None


def test_rounds_and_durations_are_positive() -> None:
    assert _arguments([]).rounds == 3
    with pytest.raises(SystemExit):
        _arguments(["--rounds", "0"])
