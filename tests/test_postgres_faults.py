"""Postgres going away: calls fail fast with ``unavailable``, the server stays up and
serves again once the database is back, without a restart.

The outage is simulated with connections killed by ``pg_terminate_backend`` and with a
TCP proxy taken down in front of the server, never by stopping the shared cluster.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import sqlalchemy as sa

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.contract import new_event
from bridge_store_sql.backend import SqlBackend
from testkit.services import run_async

from .support.postgres import TcpProxy, emptied
from .support.server import StoreHttpClient, serve

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def database(make_migrated_postgres_url: Callable[[], str]) -> str:
    """One migrated database for the module: a database per test would cost more than
    most of the tests."""
    return make_migrated_postgres_url()


@pytest.fixture
def database_url(database: str) -> str:
    return emptied(database)


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    forwarder = TcpProxy()
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


async def kill_appends_waiting_on_the_counter(url: str, run_id: str, waiting: int) -> int:
    """Hold the run's counter row until ``waiting`` appends queue on it, then kill them.

    Every append bumps that row, so each one the workers make blocks in the database:
    terminating the server's connections then lands on statements in flight, never
    only on idle pooled connections the pool would replace unnoticed. Returns how many
    connections were killed.
    """
    holder = await asyncpg.connect(url)
    try:
        async with holder.transaction():
            await holder.execute(
                "SELECT 1 FROM run_event_counters WHERE run_id = $1 FOR UPDATE", run_id
            )
            for _ in range(1200):
                # Statistics views are a snapshot per transaction unless cleared.
                await holder.execute("SELECT pg_stat_clear_snapshot()")
                blocked = await holder.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                )
                if blocked >= waiting:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"only {blocked} of {waiting} appends queued on the lock")
            pids = await holder.fetch(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            for row in pids:
                await holder.execute("SELECT pg_terminate_backend($1)", row["pid"])
            return len(pids)
    finally:
        await holder.close()


def test_killed_connections_under_load_cost_retries_not_data(database_url: str) -> None:
    """Appends keep flowing while the connections serving them are killed mid-statement.

    Keyed appends are retried (by the server on a dead connection, by the client after
    ``unavailable``: safe, the key dedupes); keyless ones are not, so each one killed
    reaches its client as ``unavailable`` (it may or may not have been stored).
    """
    keyed_workers, keyless_workers, kills = 3, 3, 5
    workers = keyed_workers + keyless_workers
    acknowledged: list[dict[str, Any]] = []
    errors: list[ConnectError] = []
    keyless_failures = 0
    stop = threading.Event()
    lock = threading.Lock()

    with serve("--store", database_url) as server:
        server.call("runEvents", "append", {"runId": "busy", "eventType": "t", "payload": "first"})
        first = server.events("busy")

        def append(client: StoreHttpClient, worker: int, index: int, *, keyed: bool) -> None:
            nonlocal keyless_failures
            data = {"runId": "busy", "eventType": "t", "payload": [worker, index]}
            if keyed:
                data["idempotencyKey"] = f"{worker}-{index}"
            for _ in range(50):
                try:
                    event = client.call("runEvents", "append", data)
                    break
                except ConnectError as error:
                    with lock:
                        errors.append(error)
                        if not keyed:
                            keyless_failures += 1
                            return
            else:
                raise AssertionError("the server never recovered")
            with lock:
                acknowledged.append(event)

        def work(worker: int) -> None:
            client = server.new_client()
            index = 0
            while not stop.is_set():
                append(client, worker, index, keyed=worker < keyed_workers)
                index += 1
            client.close()

        threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
        for thread in threads:
            thread.start()
        try:
            killed = [
                run_async(
                    lambda: kill_appends_waiting_on_the_counter(database_url, "busy", workers)
                )
                for _ in range(kills)
            ]
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=300)

        # The faults happened: each round killed connections with appends in flight,
        # and every keyless append among them failed to its client as unavailable.
        assert all(count >= workers for count in killed), killed
        assert keyless_failures >= kills * keyless_workers
        assert errors
        assert all(error.code == Code.UNAVAILABLE for error in errors), errors
        stored = server.events("busy")
        # Still the same process, serving.
        assert server.process.poll() is None
    # The log has no gaps: a killed append left nothing half-done.
    assert [event["seq"] for event in stored] == list(range(1, len(stored) + 1))
    assert stored[0] == first[0]
    # Every acknowledged append is stored once, as it was acknowledged.
    by_payload = {tuple(event["payload"]): event for event in stored[1:]}
    assert len(by_payload) == len(stored) - 1
    for event in acknowledged:
        assert by_payload[tuple(event["payload"])] == event
    keyed = {event["idempotencyKey"] for event in acknowledged if event["idempotencyKey"]}
    assert keyed == {e["idempotencyKey"] for e in stored if e["idempotencyKey"]}
    assert len(acknowledged) <= len(stored) - 1 <= len(acknowledged) + keyless_failures


def test_database_outage_is_unavailable_then_served_again(
    database_url: str, proxy: TcpProxy
) -> None:
    name = database_url.rsplit("/", 1)[1]
    url = proxy.url(name) + "?connect_timeout=5"
    with serve("--store", url) as server:
        agent = {"agentId": "a", "cwd": "/w", "updatedAt": 1}
        server.call("agents", "create", {"agent": agent})
        server.call("runEvents", "append", {"runId": "r", "eventType": "t"})

        proxy.stop()
        for substore, method, data in (
            ("agents", "get", {"agentId": "a"}),
            ("agents", "update", {"agent": agent}),
            ("runEvents", "append", {"runId": "r", "eventType": "t"}),
            ("runEvents", "list", {"runId": "r"}),
            ("checkpoints", "create", {"agentId": "a", "blobId": "b", "data": ""}),
        ):
            with pytest.raises(ConnectError) as caught:
                server.call(substore, method, data)
            assert caught.value.code == Code.UNAVAILABLE, caught.value
        assert server.process.poll() is None

        proxy.start()
        assert server.call("agents", "get", {"agentId": "a"}) == agent
        appended = server.call("runEvents", "append", {"runId": "r", "eventType": "t"})
        assert appended["seq"] == 2


@pytest.fixture
async def backend_with(
    database_url: str,
) -> AsyncIterator[Callable[[str], Any]]:
    opened: list[SqlBackend] = []

    async def open_with(query: str) -> SqlBackend:
        backend = open_backend(get_plugin_manager(), f"{database_url}?{query}")
        assert isinstance(backend, SqlBackend)
        await backend.start(migrate=True)
        opened.append(backend)
        return backend

    try:
        yield open_with
    finally:
        for backend in opened:
            await backend.close()


async def test_statement_stuck_on_a_lock_times_out_as_unavailable(
    database_url: str, backend_with: Callable[[str], Any]
) -> None:
    backend: SqlBackend = await backend_with("command_timeout=1")
    await backend.agents.create("default", {"agentId": "a", "cwd": "/w", "updatedAt": 1})
    locked = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        async def work() -> None:

            connection = await asyncpg.connect(database_url)
            try:
                async with connection.transaction():
                    await connection.execute("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE")
                    locked.set()
                    await asyncio.to_thread(release.wait, 60)
            finally:
                await connection.close()

        asyncio.run(work())

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert await asyncio.to_thread(locked.wait, 30)
        with pytest.raises(ConnectError) as caught:
            await backend.agents.get("default", "a")
        assert caught.value.code == Code.UNAVAILABLE
    finally:
        release.set()
        await asyncio.to_thread(holder.join, 30)
    assert (await backend.agents.get("default", "a") or {}).get("agentId") == "a"


async def test_exhausted_pool_is_unavailable_not_a_hang(
    backend_with: Callable[[str], Any],
) -> None:
    backend: SqlBackend = await backend_with("pool_size=1&max_overflow=0&pool_timeout=0.5")
    # The only connection is busy for far longer than the pool timeout.
    blocker_ready = asyncio.Event()

    async def occupy() -> None:
        def work(conn: Any) -> None:
            blocker_ready.set()
            conn.execute(sa.text("SELECT pg_sleep(3)"))

        await backend.db.read(work, what="test")

    occupant = asyncio.create_task(occupy())
    await blocker_ready.wait()
    with pytest.raises(ConnectError) as caught:
        await backend.agents.get("default", "a")
    assert caught.value.code == Code.UNAVAILABLE
    assert "pool" in caught.value.message
    await occupant
    assert await backend.agents.get("default", "a") is None


async def test_in_process_backend_recovers_after_an_outage(
    database_url: str, proxy: TcpProxy
) -> None:
    name = database_url.rsplit("/", 1)[1]
    backend = open_backend(get_plugin_manager(), proxy.url(name))
    await backend.start(migrate=True)
    try:
        assert backend.run_events is not None
        await backend.run_events.append(
            "default", new_event({"runId": "r", "eventType": "t"}, "in")
        )
        await asyncio.to_thread(proxy.stop)
        for _ in range(3):
            with pytest.raises(ConnectError) as caught:
                await backend.run_events.list("default", "r", after_seq=0, limit=10)
            assert caught.value.code == Code.UNAVAILABLE
        await asyncio.to_thread(proxy.start)
        assert [
            e["seq"] for e in await backend.run_events.list("default", "r", after_seq=0, limit=10)
        ] == [1]
    finally:
        await backend.close()
