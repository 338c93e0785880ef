"""``bridge-store serve`` storage arguments for a fresh store of each kind.

The kinds the end-to-end tests run on: every backend, and the team route (rows and
event logs on Postgres, checkpoint blobs on S3). Each param carries the markers of
the services it needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

STORE_KINDS = [
    pytest.param("memory"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("postgres+s3", marks=[pytest.mark.postgres, pytest.mark.s3]),
]
#: The kinds that outlive a server restart.
DURABLE_STORE_KINDS = [kind for kind in STORE_KINDS if kind.values != ("memory",)]
#: A private Redis Cluster (3 primaries, a replica each) for the test module that
#: asks for it: costlier than a prefix on the machine's Redis, so opted into per test.
REDIS_CLUSTER_KIND = pytest.param("redis-cluster", marks=pytest.mark.redis)
#: SQLite served by ``serve --workers 2``: the HTTP surfaces run against two processes
#: too, where each call, poll or page may land on either.
TWO_WORKERS_KIND = pytest.param("sqlite-2-workers")


def serve_arguments(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """``serve`` arguments for a fresh, empty store of ``kind``, cleaned up by fixtures."""
    if kind == "memory":
        return ["--store", "memory://"]
    if kind == "sqlite":
        # An empty file is an empty database; commands that only read create none.
        (tmp_path / "store.db").touch(mode=0o600)
        return ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    if kind == "sqlite-2-workers":
        return [*serve_arguments("sqlite", request, tmp_path), "--workers", "2"]
    if kind == "postgres":
        return ["--store", request.getfixturevalue("make_postgres_url")()]
    if kind == "redis":
        return ["--store", request.getfixturevalue("make_redis_url")()]
    if kind == "redis-cluster":
        return ["--store", request.getfixturevalue("make_cluster_url")()]
    if kind == "s3":
        return ["--store", request.getfixturevalue("make_s3_url")()]
    if kind == "postgres+s3":
        postgres = request.getfixturevalue("make_postgres_url")()
        return ["--store", postgres, "--checkpoints", request.getfixturevalue("make_s3_url")()]
    raise AssertionError(f"unknown store kind {kind}")
