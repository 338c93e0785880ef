"""Every wait on a backend is bounded: partitions, resets, and ``serve --backend-timeout``.

A partition (packets dropped, nothing refused) is the outage no error ends: only
timeouts do. Each backend is reached through a :class:`~tests.support.proxy.FaultyProxy`
in front of the machine's shared server, with a one-second backend timeout; every call
made while the proxy drops everything must fail with ``unavailable``, and calls must
succeed again once it forwards. A call that hangs past ``HUNG_SECONDS`` fails the test
(the defaults before this let Postgres calls hang for a whole partition, S3 ones for
60 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import BackendOptions
from bridge_store.backend.tenants import DEFAULT_TENANT as TENANT
from bridge_store.conformance.harness import agent
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.rpc.contract import new_event
from bridge_store.server.app import METRICS_PATH
from bridge_store.server.config import READY_PREFIX
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from testkit.services import S3Server, s3_store_url
from tests.support.proxy import FaultyProxy
from tests.support.redis import MakeRedisUrl

TIMEOUT = BackendOptions(timeout=1.0)
#: A call still waiting after this long is hung (the timeout is one second).
HUNG_SECONDS = 15.0
TOKEN = "backend-timeout-test-token"
SERVE = (sys.executable, "-m", "bridge_store", "serve", "--port", "0")


def through(url: str, proxy: FaultyProxy) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@" if credentials else ""
    return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{proxy.port}"))


@pytest.fixture
def proxied_url(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, FaultyProxy]]:
    """A store URL of the parametrized backend, reached through a FaultyProxy."""
    backend: str = request.param
    if backend == "postgres":
        url = request.getfixturevalue("make_postgres_url")()
    elif backend == "redis":
        make: MakeRedisUrl = request.getfixturevalue("make_redis_url")
        url = make()
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        url = server.url("timeouts/")
    target = urlsplit(server.endpoint_url if backend == "s3" else url)
    proxy = FaultyProxy(target.hostname or "127.0.0.1", target.port or 0)
    try:
        if backend == "s3":
            yield s3_store_url(f"http://127.0.0.1:{proxy.port}", "timeouts/"), proxy
        else:
            yield through(url, proxy), proxy
    finally:
        proxy.close()


BACKENDS = [
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture
async def proxied_store(
    proxied_url: tuple[str, FaultyProxy],
) -> AsyncIterator[tuple[OpenStores, FaultyProxy]]:
    url, proxy = proxied_url
    opened = await open_stores(
        get_plugin_manager(), Routes.single(url), migrate=True, options=TIMEOUT
    )
    try:
        yield opened, proxy
    finally:
        proxy.heal()
        await opened.close()


async def outcome(call: Awaitable[Any]) -> Code | None:
    """None if the call succeeds, else its Connect code; fails the test if it hangs."""
    try:
        async with asyncio.timeout(HUNG_SECONDS):
            await call
    except TimeoutError:
        pytest.fail(f"a call to the backend hung for {HUNG_SECONDS} s")
    except ConnectError as error:
        return error.code
    return None


@pytest.mark.parametrize("proxied_url", BACKENDS, indirect=True)
async def test_a_partition_gives_unavailable_and_the_store_recovers(
    proxied_store: tuple[OpenStores, FaultyProxy],
) -> None:
    opened, proxy = proxied_store
    stores = opened.stores
    await stores.agents.create(TENANT, agent("before"))
    await stores.checkpoints.create(TENANT, "before", "blob", b"\x00" * 1024)
    proxy.blackhole()
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: stores.agents.get(TENANT, "before"),
        lambda: stores.agents.get(TENANT, "before"),
        lambda: stores.run_events.append(
            TENANT, new_event({"runId": "r", "eventType": "e"}, "input")
        ),
        lambda: stores.checkpoints.get(TENANT, "before", "blob"),
    ]
    for call in calls:
        assert await outcome(call()) is Code.UNAVAILABLE
    proxy.heal()
    # Connections opened during the partition are dead too; each is found out within
    # the timeout, and the store answers again.
    for _ in range(12):
        if await outcome(stores.agents.get(TENANT, "before")) is None:
            break
    assert await stores.agents.get(TENANT, "before") == agent("before")
    assert await stores.checkpoints.get(TENANT, "before", "blob") == b"\x00" * 1024


@pytest.mark.parametrize("proxied_url", BACKENDS, indirect=True)
def test_serve_backend_timeout_bounds_calls_logs_and_counts_the_outage_once(
    proxied_url: tuple[str, FaultyProxy], tmp_path: Path
) -> None:
    url, proxy = proxied_url
    scheme = urlsplit(url).scheme
    process = subprocess.Popen(
        [*SERVE, "--backend-timeout", "1", "--store", url, "--log-level", "info"],
        cwd=tmp_path,
        env={**os.environ, "BRIDGE_STORE_AUTH_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        base_url = _ready_url(process)
        body = {"substore": "agents", "method": "get", "input": {"agentId": "a"}}
        headers = {"authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=HUNG_SECONDS) as client:
            assert client.post(CALL_STORE_PATH, json=body).status_code == 200
            proxy.blackhole()
            for _ in range(3):
                answer = client.post(CALL_STORE_PATH, json=body)
                assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")
            during = _backend_samples(client, scheme)
            proxy.heal()
            statuses = [client.post(CALL_STORE_PATH, json=body).status_code for _ in range(12)]
            assert statuses[-1] == 200
            after = _backend_samples(client, scheme)
    finally:
        process.terminate()
        process.wait(HUNG_SECONDS)
    log = process.stderr.read()
    process.stderr.close()
    assert len(re.findall(r"availability: \S+ is unavailable: ", log)) == 1, log
    assert len(re.findall(r"answers again after", log)) == 1, log
    assert "Traceback" not in log
    # The same outage on /metrics: down while it lasts, its failed calls by kind.
    assert during["bridge_store_backend_up"] == 0
    assert during["bridge_store_backend_errors_total"] == 3
    assert after["bridge_store_backend_up"] == 1
    assert after["bridge_store_backend_errors_total"] >= 3
    if scheme != "s3":  # a pool of connections: SQL's counts its waits, Redis' does not
        assert after["bridge_store_pool_size"] >= 1
        assert "bridge_store_pool_in_use" in after
        assert ("bridge_store_pool_waits_total" in after) == (scheme == "postgresql")


def _backend_samples(client: httpx.Client, scheme: str) -> dict[str, float]:
    """The per-backend series of the one backend, by name (errors: ``unavailable`` only)."""
    response = client.get(METRICS_PATH)
    assert response.status_code == 200, response.text
    labels = {"scheme": scheme, "substore": "agents,runs,runEvents,checkpoints"}
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            kind = sample.labels.get("kind")
            named = {k: v for k, v in sample.labels.items() if k != "kind"}
            if named == labels and kind in (None, "unavailable"):
                samples[sample.name] = sample.value
    return samples


def _ready_url(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith(READY_PREFIX):
            url: str = json.loads(line[len(READY_PREFIX) :])["url"]
            return url
    raise AssertionError(f"serve exited with {process.wait()} before it was ready")


# -- Redis connection resets ---------------------------------------------------------


async def test_a_write_to_a_connection_redis_reset_is_unavailable() -> None:
    # uvloop (which serve runs on) raises RuntimeError for a write to a transport that
    # a reset has closed; redis-py lets it through. It was answered 500 internal.
    from bridge_store_redis.errors import redis_errors

    @redis_errors
    async def write_after_reset() -> None:
        raise RuntimeError(
            "unable to perform operation on <TCPTransport closed=True reading=False "
            "0x55e0c8d0e840>; the handler is closed"
        )

    @redis_errors
    async def a_bug() -> None:
        raise RuntimeError("something else entirely")

    with pytest.raises(ConnectError) as caught:
        await write_after_reset()
    assert caught.value.code is Code.UNAVAILABLE
    with pytest.raises(RuntimeError, match="something else"):
        await a_bug()


@pytest.mark.redis
@pytest.mark.parametrize("proxied_url", ["redis"], indirect=True)
def test_appends_through_repeated_resets_are_answered_or_unavailable(
    proxied_url: tuple[str, FaultyProxy],
) -> None:
    # On uvloop, as serve runs: 16 appenders while every connection is reset ten times.
    import uvloop

    url, proxy = proxied_url
    failures: list[str] = []

    async def run() -> None:
        opened = await open_stores(
            get_plugin_manager(), Routes.single(url), migrate=True, options=TIMEOUT
        )
        stop = time.monotonic() + 2.0
        try:

            async def appender(index: int) -> None:
                while time.monotonic() < stop:
                    event = new_event({"runId": f"run-{index}", "eventType": "e"}, "input")
                    try:
                        await opened.stores.run_events.append(TENANT, event)
                    except ConnectError as error:
                        if error.code is not Code.UNAVAILABLE:
                            failures.append(repr(error))
                    except Exception as error:
                        failures.append(repr(error))

            async def resetter() -> None:
                while time.monotonic() < stop:
                    await asyncio.sleep(0.2)
                    await asyncio.to_thread(proxy.reset)

            await asyncio.gather(resetter(), *(appender(index) for index in range(16)))
        finally:
            await opened.close()

    uvloop.run(run())
    assert failures == []
