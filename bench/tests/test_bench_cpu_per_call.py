"""``bench cpu-per-call`` on the backends with a server: every call answered, nothing left."""

from __future__ import annotations

import pytest
import redis

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


@pytest.mark.postgres
def test_postgres_calls_are_all_answered_and_the_database_dropped() -> None:
    before = bench_databases()
    result = measure("postgres", 60)
    assert (result.target, result.calls, result.failed) == ("postgres", 60, 0)
    assert result.cpu_seconds > 0
    assert bench_databases() <= before


@pytest.mark.redis
def test_redis_calls_are_all_answered_and_the_keys_deleted() -> None:
    before = bench_keys()
    result = measure("redis", 60)
    assert (result.target, result.calls, result.failed) == ("redis", 60, 0)
    assert result.cpu_seconds > 0
    assert bench_keys() <= before
