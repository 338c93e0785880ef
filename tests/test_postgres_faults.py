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

import pytest

from bridge_store.contract import new_event
from bridge_store.errors import Code, ConnectError
from bridge_store.plugins import get_plugin_manager, open_backend
from bridge_store_sql.backend import SqlBackend

from .support.postgres import TcpProxy, terminate_connections
from .support.server import serve

pytestmark = pytest.mark.postgres


@pytest.fixture
def database_url(make_postgres_url: Callable[[], str]) -> str:
    return make_postgres_url()


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    forwarder = TcpProxy()
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


def test_killed_connections_under_load_cost_retries_not_data(database_url: str) -> None:
    """Appends keep flowing while every server connection is killed, again and again.

    Keyed appends are retried by the client after ``unavailable`` (safe: the key
    dedupes); keyless ones are not (a failed one may or may not have been stored).
    """
    keyed_workers, keyless_workers, per_worker, kills = 3, 3, 60, 5
    acknowledged: list[dict[str, Any]] = []
    errors: list[ConnectError] = []
    keyless_failures = 0
    progress = threading.Semaphore(0)
    lock = threading.Lock()

    with serve("--store", database_url) as server:

        def append(worker: int, index: int, *, keyed: bool) -> None:
            nonlocal keyless_failures
            data = {"runId": "busy", "eventType": "t", "payload": [worker, index]}
            if keyed:
                data["idempotencyKey"] = f"{worker}-{index}"
            for _ in range(50):
                try:
                    event = server.call("runEvents", "append", data)
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
            for index in range(per_worker):
                append(worker, index, keyed=worker < keyed_workers)
                progress.release()

        workers = keyed_workers + keyless_workers
        threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
        for thread in threads:
            thread.start()
        for _ in range(kills):
            for _ in range(workers * per_worker // (kills + 1)):
                progress.acquire(timeout=120)
            terminate_connections(database_url)
        for thread in threads:
            thread.join(timeout=300)

        assert all(error.code == Code.UNAVAILABLE for error in errors), errors
        stored = server.events("busy")
        # Still the same process, serving.
        assert server.process.poll() is None
    # The log has no gaps: a killed append left nothing half-done.
    assert [event["seq"] for event in stored] == list(range(1, len(stored) + 1))
    # Every acknowledged append is stored once, as it was acknowledged.
    by_payload = {tuple(event["payload"]): event for event in stored}
    assert len(by_payload) == len(stored)
    for event in acknowledged:
        assert by_payload[tuple(event["payload"])] == event
    assert sum(1 for e in acknowledged if e["idempotencyKey"]) == keyed_workers * per_worker
    assert len(acknowledged) <= len(stored) <= len(acknowledged) + keyless_failures


def test_database_outage_is_unavailable_then_served_again(
    make_postgres_url: Callable[[], str], proxy: TcpProxy
) -> None:
    name = make_postgres_url().rsplit("/", 1)[1]
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
    await backend.agents.create({"agentId": "a", "cwd": "/w", "updatedAt": 1})
    locked = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        async def work() -> None:
            import asyncpg  # type: ignore[import-untyped]

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
            await backend.agents.get("a")
        assert caught.value.code == Code.UNAVAILABLE
    finally:
        release.set()
        await asyncio.to_thread(holder.join, 30)
    assert (await backend.agents.get("a") or {}).get("agentId") == "a"


async def test_exhausted_pool_is_unavailable_not_a_hang(
    backend_with: Callable[[str], Any],
) -> None:
    backend: SqlBackend = await backend_with("pool_size=1&max_overflow=0&pool_timeout=0.5")
    # The only connection is busy for far longer than the pool timeout.
    blocker_ready = asyncio.Event()

    async def occupy() -> None:
        def work(conn: Any) -> None:
            blocker_ready.set()
            conn.exec_driver_sql("SELECT pg_sleep(3)")

        await backend.db.read(work, what="test")

    occupant = asyncio.create_task(occupy())
    await blocker_ready.wait()
    with pytest.raises(ConnectError) as caught:
        await backend.agents.get("a")
    assert caught.value.code == Code.UNAVAILABLE
    assert "pool" in caught.value.message
    await occupant
    assert await backend.agents.get("a") is None


async def test_in_process_backend_recovers_after_an_outage(
    make_postgres_url: Callable[[], str], proxy: TcpProxy
) -> None:
    name = make_postgres_url().rsplit("/", 1)[1]
    backend = open_backend(get_plugin_manager(), proxy.url(name))
    await backend.start(migrate=True)
    try:
        assert backend.run_events is not None
        await backend.run_events.append(new_event({"runId": "r", "eventType": "t"}, "in"))
        await asyncio.to_thread(proxy.stop)
        for _ in range(3):
            with pytest.raises(ConnectError) as caught:
                await backend.run_events.list("r", after_seq=0, limit=10)
            assert caught.value.code == Code.UNAVAILABLE
        await asyncio.to_thread(proxy.start)
        assert [e["seq"] for e in await backend.run_events.list("r", after_seq=0, limit=10)] == [1]
    finally:
        await backend.close()
