"""Redis Cluster failovers under append load, through ``bridge-store serve``.

A private cluster of 3 primaries with a replica each (``tests.support.redis_cluster``),
served on ``redis+cluster://...?wait_replicas=1``. While workers append over HTTP, the
primary holding the first worker's run log either hands over to its replica
(``CLUSTER FAILOVER``, as an operator does it) or is killed (the cluster promotes the
replica by itself). Every call is answered with success or ``unavailable``, never
``internal``; the same server process carries on, on the new primary, with no
restart; and no acknowledged append is lost, since with ``wait_replicas=1`` an append
is acknowledged only once a replica has it. A frozen replica shows the other side:
then appends answer ``unavailable`` instead of being acknowledged unreplicated.
"""

from __future__ import annotations

import signal
import time

import pytest

from bridge_store.errors import Code, ConnectError
from bridge_store_redis.keys import KeySpace
from bridge_store_redis.settings import parse_url
from testkit.appenders import AppendClient, Appenders, audit
from tests.support.redis import store_client
from tests.support.redis_cluster import MakeClusterUrl, RedisCluster

from .support.server import serve

pytestmark = pytest.mark.redis

WORKERS = 4
#: Acknowledged appends each worker must have before the failover, and after it.
BEFORE, AFTER = 20, 20
BACKEND_TIMEOUT = "2"


def log_key(url: str, run_id: str) -> bytes:
    return KeySpace(parse_url(url).prefix, spread=True).event_log(run_id)


@pytest.mark.parametrize("how", ["failover", "crash"])
def test_a_failover_under_append_load_loses_no_acknowledged_append(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl, how: str
) -> None:
    url = make_cluster_url(wait_replicas="1")
    primary = redis_cluster.owner_of(log_key(url, "run-0"))
    with serve("--store", url, "--backend-timeout", BACKEND_TIMEOUT) as server:

        def client() -> AppendClient:
            return AppendClient(server.url, server.token)

        with Appenders(WORKERS, client) as appenders:
            appenders.wait_for([BEFORE] * WORKERS)
            started = time.monotonic()
            if how == "failover":
                promoted = redis_cluster.failover(primary)
                at_failover = appenders.counts()
            else:
                promoted = redis_cluster.crash(primary)
                at_failover = appenders.counts()
                # The new primary has no replica until the old one is back, and with
                # wait_replicas=1 appends to it are refused until then.
                redis_cluster.restart(primary)
            # The same server carries on, on the new primary, with no restart.
            appenders.wait_for([n + AFTER for n in at_failover])
            recovered = time.monotonic() - started
        assert server.process.poll() is None
        assert redis_cluster.owner_of(log_key(url, "run-0")) == promoted
        logs = [server.events(worker.run_id) for worker in appenders.workers]
        server_log = server.stderr_lines

    failed = [o for worker in appenders.workers for o in worker.failed]
    print(
        f"\n{how}: {sum(at_failover)} appends acknowledged before, "
        f"{sum(len(w.acknowledged) for w in appenders.workers)} in all, {len(failed)} "
        f"answered unavailable; every worker {AFTER} more within {recovered:.2f} s"
    )
    # Failures are "try again", never "internal"; the server's log names the error
    # class of any call that answered otherwise.
    codes = {o.error.code for o in failed if o.error}
    assert codes <= {Code.UNAVAILABLE}, "\n".join(server_log[-120:])
    for worker, log in zip(appenders.workers, logs, strict=True):
        result = audit(worker, log)
        # Gapless: a failed append left no hole and no half-written event.
        assert result.seqs_gapless
        # Nothing acknowledged was lost or changed.
        assert (result.lost, result.changed) == ([], [])
        # Only appends that failed to their client may be stored unacknowledged.
        assert len(log) == len(worker.acknowledged) + result.extra


async def test_with_a_frozen_replica_appends_are_unavailable_not_acknowledged(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl
) -> None:
    url = make_cluster_url(wait_replicas="1", socket_timeout="1")
    unsafe = f"{url.replace('&wait_replicas=1', '').replace('wait_replicas=1&', '')}"
    assert "wait_replicas" not in unsafe
    replica = redis_cluster.replica_of(redis_cluster.owner_of(log_key(url, "r")))
    event = {"runId": "r", "eventType": "t"}
    async with store_client(url) as waiting, store_client(unsafe) as not_waiting:
        await waiting.call("runEvents", "append", event)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(ConnectError) as refused:
                await waiting.call("runEvents", "append", event)
            waited = time.monotonic() - started
            # Without WAIT the same append is acknowledged though no replica has it.
            await not_waiting.call("runEvents", "append", event)
        finally:
            replica.process.send_signal(signal.SIGCONT)
        assert refused.value.code == Code.UNAVAILABLE
        assert "replica" in refused.value.message
        # Half the socket timeout for WAIT, within the 1 s bound of the call.
        assert 0.4 < waited < 1.5
        redis_cluster.wait_until_settled()
        stored = await waiting.call("runEvents", "append", event)
    # The refused append was applied by the primary (so the seqs stay gapless).
    assert stored["seq"] == 4


async def test_a_frozen_primary_is_unavailable_within_the_bound_and_then_serves_again(
    redis_cluster: RedisCluster, make_cluster_url: MakeClusterUrl
) -> None:
    url = make_cluster_url(socket_timeout="0.5")
    primary = redis_cluster.owner_of(log_key(url, "r"))
    event = {"runId": "r", "eventType": "t"}
    async with store_client(url) as client:
        await client.call("runEvents", "append", event)
        assert primary.process is not None
        primary.process.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(ConnectError) as caught:
                await client.call("runEvents", "append", event)
            waited = time.monotonic() - started
        finally:
            primary.process.send_signal(signal.SIGCONT)
        assert caught.value.code == Code.UNAVAILABLE
        assert waited < 1.0
        # Frozen for less than the node timeout or not, the shard serves again, and the
        # same backend finds it without being reopened.
        redis_cluster.wait_until_settled()
        events = await client.call("runEvents", "list", {"runId": "r"})
        again = await client.call("runEvents", "append", event)
    assert again["seq"] == len(events["items"]) + 1
