"""Postgres with a standby: a multi-host URL follows a failover under append load.

A private primary and a synchronous streaming standby (``testkit.pg_cluster``, never
the machine's shared Postgres) serve ``bridge-store serve`` through
``postgresql://primary,standby/db?target_session_attrs=read-write``. While workers
append, the standby is promoted and the primary stopped. Calls in flight then fail
as ``unavailable`` (never ``internal``), the same server process reconnects to the
new primary on its own, and no acknowledged append is lost: with synchronous
replication a commit is acknowledged only once the standby has it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridge_store.errors import Code
from testkit.appenders import AppendClient, Appenders, audit
from testkit.pg_cluster import PostgresCluster, postgres_cluster
from testkit.services import execute

from .support.server import serve

pytestmark = pytest.mark.postgres

WORKERS = 4
#: Acknowledged appends each worker must have before the failover, and after it.
BEFORE, AFTER = 20, 20


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster(standby=True, synchronous=True) as started:
        execute(started.primary.url(), "CREATE DATABASE bridge_store")
        yield started


def test_failover_under_append_load_keeps_every_acknowledged_append(
    cluster: PostgresCluster,
) -> None:
    url = cluster.multi_host_url("bridge_store")
    with serve("--store", url) as server:

        def client() -> AppendClient:
            return AppendClient(server.url, server.token)

        with Appenders(WORKERS, client) as appenders:
            appenders.wait_for([BEFORE] * WORKERS)
            cluster.failover()
            at_failover = appenders.counts()
            # The same server carries on, on the new primary, with no restart.
            appenders.wait_for([n + AFTER for n in at_failover])
        assert server.process.poll() is None
        logs = [server.events(worker.run_id) for worker in appenders.workers]

    for worker, log in zip(appenders.workers, logs, strict=True):
        # The failover caught every worker: after the promotion its next append waited
        # on the old primary for a standby that was gone, until the primary stopped.
        assert worker.failed
        # Failures are "try again", never "internal".
        assert {o.error.code for o in worker.failed if o.error} == {Code.UNAVAILABLE}
        result = audit(worker, log)
        # Gapless: a failed append left no hole and no half-written event.
        assert result.seqs_gapless
        # Nothing acknowledged was lost or changed: a commit is acknowledged only once
        # the synchronous standby has it.
        assert (result.lost, result.changed) == ([], [])
        # Only appends that failed to their client may be stored unacknowledged.
        assert len(log) == len(worker.acknowledged) + result.extra
