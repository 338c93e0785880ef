"""GET /metrics: what each call records (on one worker and on one of ``serve --workers
2``), auth, one registry per app, backend figures."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import PoolStats
from bridge_store.ops.metrics import DURATION_BUCKETS, Metrics
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.rpc.dispatch import HANDLERS
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import METRICS_PATH, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store_sql.backend import SqlBackend
from testkit.inprocess import running
from tests.support.server import serve

TOKEN = "metrics-test-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def app_config(url: str = "memory://", **options: Any) -> ServerConfig:
    return ServerConfig(routes=Routes.single(url), auth_token=TOKEN, **options)


#: A server's base URL, or a client on one connection to it (under ``--workers 2``,
#: one worker's: its metrics count its own calls).
Target = str | httpx.Client


def _on(target: Target) -> tuple[httpx.Client | Any, str]:
    """What to send requests with, and the prefix of their paths."""
    return (target, "") if isinstance(target, httpx.Client) else (httpx, target)


def post(target: Target, substore: Any, method: Any, data: Any) -> httpx.Response:
    http, base_url = _on(target)
    return http.post(
        base_url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers=AUTH,
        timeout=10.0,
    )


def scrape(target: Target, headers: dict[str, str] | None = None) -> Samples:
    http, base_url = _on(target)
    response = http.get(base_url + METRICS_PATH, headers=AUTH if headers is None else headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture(params=[1, 2], ids=["one-worker", "two-workers"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[httpx.Client]:
    """A client on one kept-alive connection: to an app in this process, or to one
    worker of ``serve --workers 2``, which counts the calls that worker answers."""
    with serving(request.param, tmp_path) as base_url, httpx.Client(base_url=base_url) as client:
        yield client


@contextmanager
def serving(workers: int, directory: Path) -> Iterator[str]:
    if workers == 1:
        with running(create_app(app_config())) as base_url:
            yield base_url
        return
    store = f"sqlite:///{directory / 'store.db'}"
    with serve("--store", store, "--workers", str(workers), token=TOKEN) as server:
        yield server.url.rstrip("/")


def test_each_call_is_counted_timed_and_sized(served: httpx.Client) -> None:
    for index in range(3):
        assert post(
            served, "runEvents", "append", {"runId": "r", "eventType": f"e{index}"}
        ).is_success
    assert post(served, "agents", "get", {}).status_code == 400  # agentId missing
    samples = scrape(served)

    append = {"substore": "runEvents", "method": "append"}
    assert value(samples, "bridge_store_calls_total", **append, code="ok") == 3
    assert value(samples, "bridge_store_call_duration_seconds_count", **append) == 3
    assert value(samples, "bridge_store_run_events_appended_total") == 3
    assert value(samples, "bridge_store_request_bytes_total", **append) > 3 * len('"runId"')
    assert value(samples, "bridge_store_response_bytes_total", **append) > 3 * len('"seq"')
    get = {"substore": "agents", "method": "get"}
    assert value(samples, "bridge_store_calls_total", **get, code="invalid_argument") == 1
    # Every method's ok series exists before its first call, so rates see its first one.
    assert value(samples, "bridge_store_calls_total", **get, code="ok") == 0
    assert value(samples, "bridge_store_calls_in_flight") == 0


def test_duration_buckets_resolve_a_tenth_of_a_millisecond_to_ten_seconds(
    served: httpx.Client,
) -> None:
    post(served, "agents", "get", {"agentId": "a"})
    bounds = {
        float(dict(labels)["le"])
        for (name, labels) in scrape(served)
        if name == "bridge_store_call_duration_seconds_bucket"
    }
    assert min(bounds) == 0.0001
    assert max(bound for bound in bounds if bound != float("inf")) == 10.0
    assert bounds == {*DURATION_BUCKETS, float("inf")}


def test_checkpoint_bytes_are_the_blob_bytes_not_their_base64(served: httpx.Client) -> None:
    blob = bytes(range(256)) * 40
    data = base64.b64encode(blob).decode()
    blob_input = {"agentId": "a", "blobId": "b", "data": data}
    assert post(served, "checkpoints", "create", blob_input).is_success
    assert post(served, "checkpoints", "update", blob_input).is_success
    assert post(served, "checkpoints", "get", {"agentId": "a", "blobId": "b"}).is_success
    assert post(served, "checkpoints", "get", {"agentId": "a", "blobId": "absent"}).is_success
    samples = scrape(served)
    assert value(samples, "bridge_store_checkpoint_bytes_written_total") == 2 * len(blob)
    assert value(samples, "bridge_store_checkpoint_bytes_read_total") == len(blob)


def test_labels_never_take_a_value_the_method_table_lacks(served: httpx.Client) -> None:
    for index in range(20):
        post(served, f"substore-{index}", "get", {})
        post(served, "agents", f"method-{index}", {})
    post(served, ["a", "list"], {"an": "object"}, {})
    # Refused before the body named a call: no token at all.
    served.post(CALL_STORE_PATH, json={"substore": "agents", "method": "get"})
    # Per-call series; per-backend ones are labelled by the substores a backend serves.
    samples = {
        key: count
        for key, count in scrape(served).items()
        if not key[0].startswith(("bridge_store_backend_", "bridge_store_pool_"))
    }
    substores = {dict(labels).get("substore") for (_, labels) in samples} - {None}
    methods = {dict(labels).get("method") for (_, labels) in samples} - {None}
    assert substores == {*HANDLERS, "unknown"}
    assert methods == {name for names in HANDLERS.values() for name in names} | {"unknown"}
    unknown = {"substore": "unknown", "method": "unknown"}
    assert value(samples, "bridge_store_calls_total", **unknown, code="unimplemented") == 40
    assert value(samples, "bridge_store_calls_total", **unknown, code="invalid_argument") == 1
    assert value(samples, "bridge_store_calls_total", **unknown, code="unauthenticated") == 1


def test_process_metrics_come_from_the_library_collectors(served: httpx.Client) -> None:
    names = {name for (name, _) in scrape(served)}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= names
    assert {"python_info", "python_gc_collections_total"} <= names


def test_metrics_need_the_token_unless_public() -> None:
    with running(create_app(app_config())) as base_url:
        refused = httpx.get(base_url + METRICS_PATH)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = httpx.get(base_url + METRICS_PATH, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
    with running(create_app(app_config(metrics_public=True))) as base_url:
        assert "bridge_store_calls_total" in {name for (name, _) in scrape(base_url, {})}


def test_metrics_with_a_valid_non_admin_token_is_403_naming_the_admin_scope() -> None:
    # A write or read token of one tenant is refused, and told why (it was 401
    # "missing or invalid bearer token", as if it were unknown).
    entries = [
        TokenEntry("ops", token_digest("ops-token-0123456789"), "ops", Scope.OPERATOR),
        TokenEntry("alice", token_digest("alice-token-0123456789"), "team-a", Scope.WRITE),
    ]
    config = ServerConfig(routes=Routes.single("memory://"), tokens=TokenRegistry(entries))
    with running(create_app(config)) as base_url:
        assert scrape(base_url, {"authorization": "Bearer ops-token-0123456789"})
        refused = httpx.get(
            base_url + METRICS_PATH, headers={"authorization": "Bearer alice-token-0123456789"}
        )
        assert refused.status_code == 403
        assert refused.text == "this token lacks the admin scope /metrics needs (it has write)\n"
        unknown = httpx.get(base_url + METRICS_PATH, headers={"authorization": "Bearer nope"})
        assert unknown.status_code == 401
        assert unknown.text == "missing or invalid bearer token\n"


def test_metrics_off_serves_no_endpoint() -> None:
    app = create_app(app_config(metrics=False))
    assert app.metrics is None
    with running(app) as base_url:
        assert httpx.get(base_url + METRICS_PATH, headers=AUTH).status_code == 404
        assert post(base_url, "agents", "get", {"agentId": "a"}).status_code == 200


def test_two_apps_in_one_process_keep_their_own_series() -> None:
    first, second = create_app(app_config()), create_app(app_config())
    with running(first) as one, running(second) as two:
        for _ in range(2):
            post(one, "agents", "get", {"agentId": "a"})
        post(two, "agents", "get", {"agentId": "a"})
        labels = {"substore": "agents", "method": "get", "code": "ok"}
        assert value(scrape(one), "bridge_store_calls_total", **labels) == 2
        assert value(scrape(two), "bridge_store_calls_total", **labels) == 1


def test_backends_are_labelled_by_scheme_and_substores_never_by_url(
    tmp_path: Any,
) -> None:
    secret_path = tmp_path / "secret-name.db"
    routes = Routes(
        agents=f"sqlite:///{secret_path}",
        runs=f"sqlite:///{secret_path}",
        run_events="memory://",
        checkpoints="memory://",
    )
    app = create_app(ServerConfig(routes=routes, auth_token=TOKEN))
    with running(app) as base_url:
        response = httpx.get(base_url + METRICS_PATH, headers=AUTH)
        samples = scrape(base_url)
    assert "secret-name" not in response.text
    sqlite = {"scheme": "sqlite", "substore": "agents,runs"}
    # One writer connection and the reader pool's (4 by default).
    assert value(samples, "bridge_store_pool_size", **sqlite) == 5
    assert value(samples, "bridge_store_pool_in_use", **sqlite) == 0
    # The memory backend has no pool, so no pool series.
    assert not [
        key
        for key in samples
        if key[0].startswith("bridge_store_pool_") and dict(key[1]).get("scheme") == "memory"
    ]


@pytest.mark.postgres
async def test_postgres_pool_counts_checkouts_that_wait(
    make_postgres_url: Callable[[], str],
) -> None:
    backend = open_backend(get_plugin_manager(), make_postgres_url() + "?pool_size=1")
    assert isinstance(backend, SqlBackend)
    await backend.start(migrate=True)
    try:
        assert backend.pool_stats() == PoolStats(size=1, in_use=0, waits=0)
        # Four reads at once on one connection: the first checks it out, three wait.
        await asyncio.gather(*(backend.schema_revision() for _ in range(4)))
        assert backend.pool_stats() == PoolStats(size=1, in_use=0, waits=3)
    finally:
        await backend.close()
    assert backend.pool_stats() is None


@pytest.mark.redis
async def test_redis_pool_in_use(make_redis_url: Callable[..., str]) -> None:
    from bridge_store_redis.backend import RedisBackend

    backend = open_backend(get_plugin_manager(), make_redis_url(max_connections="7"))
    assert isinstance(backend, RedisBackend)
    await backend.start(migrate=True)
    try:
        assert await backend.readiness() is None
        stats = backend.pool_stats()
        assert stats is not None
        assert (stats.size, stats.in_use, stats.waits) == (7, 0, None)
        # A connection held (as a blocking command holds one): counted while it is out.
        pool = backend._client.connection_pool
        held = await pool.get_connection()
        try:
            assert backend.pool_stats() == PoolStats(size=7, in_use=1, waits=None)
        finally:
            await pool.release(held)
        assert backend.pool_stats() == PoolStats(size=7, in_use=0, waits=None)
    finally:
        await backend.close()


def test_durations_land_in_the_first_bucket_at_or_above_them() -> None:
    metrics = Metrics(HANDLERS)
    get = metrics.method("agents", "get")
    for seconds in (0.00005, 0.0001, 0.0003, 0.0003, 20.0):
        get.record("ok", seconds, 10, 20)
    (family,) = [
        family
        for family in metrics.registry.collect()
        if family.name == "bridge_store_call_duration_seconds"
    ]
    buckets = {
        sample.labels["le"]: sample.value
        for sample in family.samples
        if sample.name.endswith("_bucket")
        and sample.labels["method"] == "get"
        and sample.labels["substore"] == "agents"
    }
    # Cumulative, "less or equal": 0.1 ms holds the first two, 0.5 ms the next two.
    assert (buckets["0.0001"], buckets["0.00025"], buckets["0.0005"]) == (2, 2, 4)
    assert (buckets["10.0"], buckets["+Inf"]) == (4, 5)
    agents_get = {"substore": "agents", "method": "get"}
    sums = {s.name: s.value for s in family.samples if s.labels == agents_get}
    assert sums["bridge_store_call_duration_seconds_count"] == 5
    assert sums["bridge_store_call_duration_seconds_sum"] == pytest.approx(20.00075)
