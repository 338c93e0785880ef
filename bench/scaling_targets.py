"""The stores ``python -m bench scaling`` lists from, and how each is filled fast.

One :class:`Target` per backend: how to open it, and how to load agents, runs and one
run's events the fast way for that backend (bulk INSERTs, COPY on Postgres, Redis
pipelines for the event log, concurrent substore calls elsewhere). The rows are made
by the functions here, so the pages :mod:`bench.scaling` times know what to expect.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.servers import start_child
from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import Backend, RunPosition, stored_event
from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.conformance.harness import agent, run
from bridge_store.types import Document
from bridge_store.wire import jsontext
from testkit import services

BACKENDS = ("memory", "sqlite", "postgres", "redis", "s3")
BASE_MS = 1_700_000_000_000
#: Every row the bench loads and lists belongs to this tenant.
TENANT = DEFAULT_TENANT
CWDS = 10
RUN_AGENTS = 10
AGENT_PAGE, RUN_PAGE, EVENT_PAGE = 50, 50, 100
#: Substore calls in flight at once while loading through the backend's API.
LOAD_CONCURRENCY = 64
SQL_BATCH = 5000


def agent_id(i: int) -> str:
    return f"agent-{i:07d}"


def make_agent(i: int) -> Document:
    return agent(agent_id(i), updated_at=BASE_MS + i, cwd=f"/work/project-{i % CWDS}")


def make_run(i: int) -> Document:
    return run(f"run-{i:07d}", agent_id(i % RUN_AGENTS), turn_number=i // RUN_AGENTS + 1)


def run_position(i: int) -> RunPosition:
    return RunPosition(
        turn_number=i // RUN_AGENTS + 1, run_id=f"run-{i:07d}", agent_id=agent_id(i % RUN_AGENTS)
    )


def make_event(run_id: str, seq: int) -> Document:
    """An appended event as the contract hands it to a backend (no seq/offset)."""
    return {
        "runId": run_id,
        "eventType": "sdk_message",
        "payload": {"type": "assistant", "text": f"message {seq} " + "x" * 60},
        "payloadRef": None,
        "idempotencyKey": None,
        "createdAt": BASE_MS + seq,
    }


def events_run(count: int) -> str:
    return f"events-{count}"


# -- loading ---------------------------------------------------------------------------


async def concurrently(count: int, start: int, call: Callable[[int], Awaitable[Any]]) -> None:
    semaphore = asyncio.Semaphore(LOAD_CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            await call(i)

    for chunk in range(start, count, LOAD_CONCURRENCY * 16):
        stop = min(count, chunk + LOAD_CONCURRENCY * 16)
        await asyncio.gather(*(one(i) for i in range(chunk, stop)))


class Target:
    """One backend under test: how to open it and fill it fast."""

    name = ""
    #: The largest row and event counts this target is loaded to (None: as asked).
    cap: int | None = None

    def __init__(self) -> None:
        self.backend: Backend | None = None

    @property
    def url(self) -> str:
        raise NotImplementedError

    async def open(self) -> Backend:
        backend = open_backend(get_plugin_manager(), self.url)
        await backend.start(migrate=True)
        self.backend = backend
        return backend

    async def load_rows(self, backend: Backend, start: int, stop: int) -> None:
        assert backend.agents is not None
        assert backend.runs is not None
        agents, runs = backend.agents, backend.runs
        await concurrently(stop, start, lambda i: agents.create(TENANT, make_agent(i)))
        await concurrently(stop, start, lambda i: runs.create(TENANT, make_run(i)))

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        assert backend.run_events is not None
        for seq in range(1, count + 1):
            await backend.run_events.append(TENANT, make_event(run_id, seq))

    def cleanup(self) -> None:
        """Drop what the bench made."""


class MemoryTarget(Target):
    name = "memory"
    url = "memory://"


class SqlTarget(Target):
    """Rows go in with bulk INSERTs (COPY on Postgres) on a connection of the bench's own."""

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    async def load_rows(self, backend: Backend, start: int, stop: int) -> None:
        for chunk in range(start, stop, SQL_BATCH):
            ids = range(chunk, min(stop, chunk + SQL_BATCH))
            agents = [make_agent(i) for i in ids]
            await self.insert(
                "agents",
                ["tenant", "agent_id", "cwd", "updated_at", "doc"],
                [(TENANT, a["agentId"], a["cwd"], a["updatedAt"], dump_json(a)) for a in agents],
            )
            runs = [make_run(i) for i in ids]
            await self.insert(
                "runs",
                ["tenant", "agent_id", "run_id", "turn_number", "doc"],
                [(TENANT, r["agentId"], r["runId"], r["turnNumber"], dump_json(r)) for r in runs],
            )
        await self.analyze()

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        for chunk in range(1, count + 1, SQL_BATCH):
            await self.insert(
                "run_events",
                ["tenant", "run_id", "seq", "idempotency_key", "doc"],
                [
                    (TENANT, run_id, seq, None, dump_json(make_event(run_id, seq)))
                    for seq in range(chunk, min(count + 1, chunk + SQL_BATCH))
                ],
            )
        await self.after_events(run_id, count)
        await self.analyze()

    async def after_events(self, run_id: str, count: int) -> None:
        """Dialect bookkeeping of a loaded log."""

    async def analyze(self) -> None:
        """Fresh planner statistics, as autovacuum would have after a load this size."""


def dump_json(doc: Document) -> str:
    # As the SQL backend stores documents.
    return jsontext.dumps_text(doc)


class SqliteTarget(SqlTarget):
    name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory(prefix="bench-scaling-")
        self.path = Path(self._dir.name) / "store.db"

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def _run(self, statement: str, rows: list[tuple[Any, ...]] | None = None) -> None:
        connection = sqlite3.connect(self.path, timeout=60)
        try:
            with connection:
                if rows is None:
                    connection.execute(statement)
                else:
                    connection.executemany(statement, rows)
        finally:
            connection.close()

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join("?" for _ in columns)
        statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608
        await asyncio.to_thread(self._run, statement, rows)

    async def analyze(self) -> None:
        await asyncio.to_thread(self._run, "ANALYZE")

    def cleanup(self) -> None:
        self._dir.cleanup()


class PostgresTarget(SqlTarget):
    name = "postgres"

    def __init__(self) -> None:
        super().__init__()
        self._database = services.create_database("bench")

    @property
    def url(self) -> str:
        return services.database_url(self._database)

    async def _connect(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        return await asyncpg.connect(self.url)

    async def insert(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        connection = await self._connect()
        try:
            await connection.copy_records_to_table(table, records=rows, columns=columns)
        finally:
            await connection.close()

    async def after_events(self, run_id: str, count: int) -> None:
        await self.insert(
            "run_event_counters", ["tenant", "run_id", "last_seq"], [(TENANT, run_id, count)]
        )

    async def analyze(self) -> None:
        connection = await self._connect()
        try:
            await connection.execute("ANALYZE")
        finally:
            await connection.close()

    def cleanup(self) -> None:
        services.drop_database(self._database)


class RedisTarget(Target):
    name = "redis"

    def __init__(self) -> None:
        super().__init__()
        self.prefix = f"bench-scaling-{secrets.token_hex(4)}"

    @property
    def url(self) -> str:
        return services.redis_store_url(self.prefix)

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        # The members APPEND_EVENT writes, written with pipelined ZADDs.
        import redis.asyncio

        from bridge_store.wire.jsontext import dumps
        from bridge_store_redis.events import SEQ_WIDTH
        from bridge_store_redis.keys import KeySpace, utf8

        keys = KeySpace(self.prefix)
        client = redis.asyncio.Redis.from_url(services.REDIS_URL)
        try:
            for chunk in range(1, count + 1, 10_000):
                members = {
                    b"%0*d" % (SEQ_WIDTH, seq) + dumps(make_event(run_id, seq)): seq
                    for seq in range(chunk, min(count + 1, chunk + 10_000))
                }
                await client.zadd(keys.event_log(run_id), members)
            await client.zadd(keys.event_runs(), {utf8(run_id): float("inf")})
        finally:
            await client.aclose()

    def cleanup(self) -> None:
        import redis

        with redis.Redis.from_url(services.REDIS_URL) as client:
            services.delete_prefix(client, self.prefix)


class S3Target(Target):
    name = "s3"

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        # moto in a process of its own: its Python must not share this one's GIL.
        self._dir = tempfile.TemporaryDirectory(prefix="bench-scaling-")
        self._server = start_child("s3", "", Path(self._dir.name) / "s3.log")
        self._prefix = f"bench-scaling-{secrets.token_hex(4)}/"

    @property
    def url(self) -> str:
        return services.s3_store_url(self._server.ready["url"], self._prefix)

    async def load_events(self, backend: Backend, run_id: str, count: int) -> None:
        # The objects an append writes, put concurrently at their final keys.
        from bridge_store.wire.jsontext import dumps
        from bridge_store_s3.backend import S3Backend

        assert isinstance(backend, S3Backend)
        bucket, layout = backend._bucket, backend._layout

        async def put(seq: int) -> None:
            stored = stored_event(make_event(run_id, seq), seq)
            await bucket.put(layout.event(run_id, seq), dumps(stored))

        await concurrently(count + 1, 1, put)

    def cleanup(self) -> None:
        self._server.stop()
        self._dir.cleanup()


def make_target(name: str, s3_cap: int) -> Target:
    if name == "memory":
        return MemoryTarget()
    if name == "sqlite":
        return SqliteTarget()
    if name == "postgres":
        return PostgresTarget()
    if name == "redis":
        return RedisTarget()
    if name == "s3":
        return S3Target(s3_cap)
    raise ValueError(f"unknown backend {name!r}; one of {', '.join(BACKENDS)}")


@contextmanager
def target_for(name: str, s3_cap: int) -> Iterator[Target]:
    target = make_target(name, s3_cap)
    try:
        yield target
    finally:
        target.cleanup()
