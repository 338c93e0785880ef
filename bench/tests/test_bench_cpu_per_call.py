"""``bench cpu-per-call`` on the backends with a server: every call answered, nothing left."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from bench import cpu_per_call
from bench.bytecodes import BytecodeCounter
from bench.cpu_per_call import TARGETS, measure
from testkit.services import POSTGRES_ADMIN_URL, REDIS_URL, fetch


def bench_databases() -> set[str]:
    rows = fetch(
        POSTGRES_ADMIN_URL, "SELECT datname FROM pg_database WHERE datname LIKE $1", "%bench%"
    )
    return {row[0] for row in rows}


def bench_keys() -> set[bytes]:
    with redis.Redis.from_url(REDIS_URL) as client:
        return set(client.scan_iter(match="bridge-store-bench-*", count=1000))


def test_every_target_is_a_measurable_one() -> None:
    assert set(TARGETS) == {"memory", "sqlite", "postgres", "redis", "ceiling"}
    with pytest.raises(ValueError, match="unknown target"):
        measure("s3", 10)


@pytest.mark.parametrize(
    ("target", "leftovers"),
    [
        pytest.param("postgres", bench_databases, marks=pytest.mark.postgres),
        pytest.param("redis", bench_keys, marks=pytest.mark.redis),
    ],
)
def test_calls_are_all_answered_and_the_store_removed(
    target: str, leftovers: Callable[[], set[Any]]
) -> None:
    before = leftovers()
    result = measure(target, 60)
    assert (result.target, result.calls, result.failed) == (target, 60, 0)
    assert result.cpu_seconds > 0
    assert leftovers() <= before


def test_the_ceiling_and_memory_touch_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a target without a server made a store on one")

    monkeypatch.setattr(cpu_per_call, "postgres_database", refuse)
    monkeypatch.setattr(cpu_per_call, "redis_prefix", refuse)
    for target in ("ceiling", "memory"):
        assert measure(target, 20).failed == 0


def test_bytecode_counts_are_the_same_on_every_run() -> None:
    """What --bytecodes prints depends on the code alone, not on the machine's load."""
    counts = []
    for _ in range(2):
        counter = BytecodeCounter()
        assert measure("memory", 40, counter, "agents.get").failed == 0
        counts.append(counter.bytecodes)
    assert counts[0] == counts[1]
    assert counter.calls["connect.py:CallStoreEndpoint.__call__"] == 40
    ceiling = BytecodeCounter()
    measure("ceiling", 40, ceiling, "agents.get")
    assert not any(name.startswith("connect.py:CallStoreEndpoint") for name in ceiling.bytecodes)
    assert sum(counts[0].values()) > sum(ceiling.bytecodes.values()) > 0
    report = counter.report(40, 3)
    assert report[0].endswith("bytecodes a call")
    assert len(report) == 4


def test_a_negative_bytecodes_count_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cpu_per_call.main(["--targets", "memory", "--bytecodes", "-1"])
    assert stopped.value.code == 2
    assert "--bytecodes not negative" in capsys.readouterr().err
