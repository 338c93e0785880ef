"""bench/mix.py and bench/reference_store.py: the load bench sends valid CallStore calls."""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import threading
from collections.abc import Iterator

import pytest

from bench import mix
from bench.load_checks import audit, preflight, seed
from bench.mix_recording import recorded_calls
from bench.reference_store import ReferenceStore
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.callstore import CallStoreClient
from testkit.inprocess import running

TOKEN = "bench-test-token"


@pytest.fixture(scope="module")
def world() -> mix.World:
    return mix.build_world(active_runs=2)


@pytest.fixture
def memory_server() -> Iterator[CallStoreClient]:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as url:
        client = CallStoreClient(url, TOKEN)
        yield client
        client.close()


@pytest.fixture
def reference_server() -> Iterator[CallStoreClient]:
    cursor_sdk = pytest.importorskip("cursor_sdk")
    server = cursor_sdk.StoreCallbackServer(ReferenceStore(), port=0, auth_token=TOKEN)
    client = CallStoreClient(server.endpoint.url, TOKEN)
    yield client
    client.close()
    server.close()


def test_realistic_mix_is_append_dominated() -> None:
    ops = mix.operations()
    weights: collections.Counter[str] = collections.Counter()
    for op in ops:
        weights[op.name] += op.weight
    assert sum(weights.values()) == 100
    assert weights.most_common(1) == [("runEvents.append", 50)]
    assert {"agents.get", "runs.get", "runs.update", "runEvents.list"} <= set(weights)
    assert {"agents.list", "runs.list", "checkpoints.get", "checkpoints.create"} <= set(weights)


def test_single_operation_mixes() -> None:
    for name in mix.mix_names():
        ops = mix.operations(name)
        if name in ("realistic", mix.ENDING):  # every operation (test_bench_export_runs.py)
            continue
        assert {op.name for op in ops} == {mix.ALIASES.get(name, name)}
    with pytest.raises(ValueError, match="unknown mix"):
        mix.operations("agents.explode")


def test_schedule_repeats_each_operation_by_its_weight() -> None:
    ops = mix.operations()
    order = mix.schedule(ops)
    assert collections.Counter(order) == {index: op.weight for index, op in enumerate(ops)}
    assert order == mix.schedule(ops), "the cycle is the same on every run"


def test_every_template_renders_a_callstore_request(world: mix.World) -> None:
    for op in mix.operations():
        record = world.pool(op.pool, "timed")[0]
        assert set(op.template.holes) <= set(record) | mix.DYNAMIC_HOLES, op.key
        message = mix.render(op, record)
        assert (message["substore"], message["method"]) == (op.substore, op.method)
        assert isinstance(message["input"], dict)
        assert "{{" not in json.dumps(message)


def test_shapes_come_from_the_recording(world: mix.World) -> None:
    recorded = {(call["substore"], call["method"]): call["input"] for call in recorded_calls()}
    agents_get = next(op for op in mix.operations("agents.get"))
    message = mix.render(agents_get, world.agents[0])
    assert message["input"].keys() == recorded[("agents", "get")].keys()
    append = next(op for op in mix.operations("append") if op.variant == "request")
    event = mix.render(append, world.active["timed"][0])["input"]
    assert event.keys() == recorded[("runEvents", "append")].keys()
    assert event["payload"]["agentId"] == world.active["timed"][0]["AGENT"]
    sizes = {op.variant: len(op.template.text) for op in mix.operations("append")}
    assert 800 < sizes["message-1k"] < 1200
    assert 3600 < sizes["message-4k"] < 4400


def test_world_is_deterministic_and_content_addressed(world: mix.World) -> None:
    again = mix.build_world(active_runs=2)
    assert again.calls == world.calls
    runs = [record["RUN"] for records in world.active.values() for record in records]
    assert len(set(runs)) == len(runs) == 1 + 2 + 2 + 2  # preflight, warm-up, timed, open
    for blob_id, data in world.blob_data.items():
        assert hashlib.sha256(base64.b64decode(data)).hexdigest() == blob_id


def test_bridge_store_accepts_and_answers_every_operation(
    memory_server: CallStoreClient, world: mix.World
) -> None:
    seed(memory_server, world)
    ops = mix.operations()
    assert preflight(memory_server, ops, world, is_store=True) == []
    assert audit(memory_server, world, ops, {}, connections=16) == []


def test_preflight_reports_wrong_answers(memory_server: CallStoreClient, world: mix.World) -> None:
    # Unseeded: every get misses, every update is refused.
    problems = preflight(memory_server, mix.operations(), world, is_store=True)
    assert any(
        problem.startswith("pre-flight agents.get: expected a document") for problem in problems
    )
    assert any("pre-flight runs.update: HTTP 404" in problem for problem in problems)


def test_reference_store_answers_every_operation(
    reference_server: CallStoreClient, world: mix.World
) -> None:
    seed(reference_server, world)
    ops = mix.operations()
    assert preflight(reference_server, ops, world, is_store=True) == []
    assert audit(reference_server, world, ops, {}, connections=16) == []


def test_reference_store_appends_stay_gapless_under_threads() -> None:
    store = ReferenceStore()

    def append(worker: int) -> None:
        for index in range(200):
            store.run_events.append(
                {"runId": "run-1", "eventType": "e", "idempotencyKey": f"{worker}-{index % 150}"}
            )

    threads = [threading.Thread(target=append, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log = store.run_events.logs["run-1"]
    assert [event["seq"] for event in log] == list(range(1, 4 * 150 + 1))
    page = store.run_events.list({"runId": "run-1", "afterOffset": "590"})
    assert [event["seq"] for event in page["items"]] == list(range(591, 601))
    assert "nextOffset" not in page
    first = store.run_events.list({"runId": "run-1", "limit": 2})
    assert first["nextOffset"] == "2"


def test_reference_store_lists_in_contract_order() -> None:
    store = ReferenceStore()
    for index, updated in enumerate([3, 1, 2]):
        store.agents.create(
            {"agent": {"agentId": f"agent-{index}", "cwd": "/w", "updatedAt": updated}}
        )
    page = store.agents.list({"filter": {"limit": 2}})
    assert [agent["agentId"] for agent in page["items"]] == ["agent-0", "agent-2"]
    rest = store.agents.list({"filter": {"limit": 2, "cursor": page["nextCursor"]}})
    assert [agent["agentId"] for agent in rest["items"]] == ["agent-1"]
    assert "nextCursor" not in rest
