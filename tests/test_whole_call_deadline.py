"""The backend timeout bounds a whole call, not each of its steps.

Behind a black hole (packets dropped, nothing refused) one Postgres call waited 10.0 s
with ``--backend-timeout 5``: a pre-ping that timed out, then a new connection that
timed out, each within its own bound. Every call on every backend now answers
``unavailable`` within the timeout and a little slack, however many steps it takes
(pool wait, connect, statement, a retry after a lost connection).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import BackendOptions
from bridge_store.backend.tenants import DEFAULT_TENANT as TENANT
from bridge_store.conformance.harness import agent
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.contract import new_event
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from testkit.services import S3Server, s3_store_url
from tests.support.proxy import FaultyProxy
from tests.support.redis import MakeRedisUrl

#: The backend timeout of these tests, and the bound a whole call must keep.
TIMEOUT_SECONDS = 2.0
BOUND_SECONDS = TIMEOUT_SECONDS * 1.5


def through(url: str, proxy: FaultyProxy) -> str:
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@" if credentials else ""
    return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{proxy.port}"))


@pytest.fixture
def proxied_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, FaultyProxy]]:
    backend: str = request.param
    if backend == "postgres":
        url = request.getfixturevalue("make_postgres_url")()
    elif backend == "redis":
        make: MakeRedisUrl = request.getfixturevalue("make_redis_url")
        url = make()
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        url = server.url("deadline/")
    target = urlsplit(server.endpoint_url if backend == "s3" else url)
    proxy = FaultyProxy(target.hostname or "127.0.0.1", target.port or 0)
    try:
        if backend == "s3":
            yield s3_store_url(f"http://127.0.0.1:{proxy.port}", "deadline/"), proxy
        else:
            yield through(url, proxy), proxy
    finally:
        proxy.close()


@pytest.fixture
async def proxied_store(
    proxied_url: tuple[str, FaultyProxy],
) -> AsyncIterator[tuple[OpenStores, FaultyProxy]]:
    url, proxy = proxied_url
    opened = await open_stores(
        get_plugin_manager(),
        Routes.single(url),
        migrate=True,
        options=BackendOptions(timeout=TIMEOUT_SECONDS),
    )
    try:
        yield opened, proxy
    finally:
        proxy.heal()
        await opened.close()


async def timed(call: Awaitable[Any]) -> tuple[Code | None, float]:
    started = time.monotonic()
    try:
        await call
    except ConnectError as error:
        return error.code, time.monotonic() - started
    return None, time.monotonic() - started


BACKENDS = [
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.mark.parametrize("proxied_url", BACKENDS, indirect=True)
async def test_behind_a_black_hole_every_call_is_unavailable_within_the_backend_timeout(
    proxied_store: tuple[OpenStores, FaultyProxy],
) -> None:
    opened, proxy = proxied_store
    stores = opened.stores
    await stores.agents.create(TENANT, agent("before"))
    await stores.checkpoints.create(TENANT, "before", "blob", b"\x00" * 1024)
    proxy.blackhole()
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("agents.get", lambda: stores.agents.get(TENANT, "before")),
        ("agents.get again", lambda: stores.agents.get(TENANT, "before")),
        ("agents.create", lambda: stores.agents.create(TENANT, agent("during"))),
        ("agents.list", lambda: stores.agents.list(TENANT, cwd=None, after=None, limit=10)),
        (
            "runEvents.append",
            lambda: stores.run_events.append(
                TENANT, new_event({"runId": "r", "eventType": "e"}, "input")
            ),
        ),
        ("checkpoints.get", lambda: stores.checkpoints.get(TENANT, "before", "blob")),
    ]
    took: dict[str, float] = {}
    for name, call in calls:
        code, seconds = await timed(call())
        assert code is Code.UNAVAILABLE, name
        took[name] = round(seconds, 2)
    assert max(took.values()) < BOUND_SECONDS, took
