"""Fresh Postgres databases for tests, on the machine's server.

``make_postgres_url()`` (a session-scoped factory fixture) creates a brand-new empty
database and returns its ``postgresql://`` URL; every database it made is dropped when
the test session ends. The server is ``BRIDGE_STORE_TEST_POSTGRES`` (an admin URL),
by default ``postgresql://postgres@127.0.0.1:5432/postgres``.

The helpers run asyncpg on a private event loop in a worker thread, so they work from
sync tests, from async tests and from fixtures of either kind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]
import pytest

T = TypeVar("T")

ADMIN_URL = os.environ.get(
    "BRIDGE_STORE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on its own loop in a worker thread."""

    async def main() -> T:
        return await factory()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def database_url(name: str) -> str:
    """The URL of database ``name`` on the test server."""
    parts = urlsplit(ADMIN_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))


def execute(url: str, *statements: str) -> None:
    """Run SQL statements, each on its own, in autocommit."""

    async def work() -> None:
        connection = await asyncpg.connect(url)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    run_async(work)


def fetch(url: str, query: str, *args: Any) -> list[asyncpg.Record]:
    async def work() -> list[asyncpg.Record]:
        connection = await asyncpg.connect(url)
        try:
            return list(await connection.fetch(query, *args))
        finally:
            await connection.close()

    return run_async(work)


def create_database() -> str:
    """Create an empty database with a unique name; returns its name."""
    name = f"bridge_store_test_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    execute(ADMIN_URL, f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    # FORCE: a test that failed may have left a server process connected.
    execute(ADMIN_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def make_postgres_url() -> Iterator[Callable[[], str]]:
    """A factory: each call creates a fresh empty database and returns its URL."""
    created: list[str] = []

    def make() -> str:
        name = create_database()
        created.append(name)
        return database_url(name)

    yield make
    for name in created:
        drop_database(name)


def free_port() -> int:
    """A loopback port nothing listens on (at the time of the call)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def terminate_connections(url: str) -> int:
    """Kill every other server connection to ``url``'s database; how many were killed.

    Returns once those server processes are gone, so their sockets are closed.
    """

    async def work() -> int:
        connection = await asyncpg.connect(url)
        try:
            pids = await connection.fetch(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            for row in pids:
                await connection.execute("SELECT pg_terminate_backend($1)", row["pid"])
            for _ in range(200):
                alive = await connection.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])",
                    [row["pid"] for row in pids],
                )
                if alive == 0:
                    break
                await asyncio.sleep(0.05)
            return len(pids)
        finally:
            await connection.close()

    return run_async(work)
