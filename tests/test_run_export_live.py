"""``serve --export-runs``: each run sent once it ends, through collector outages, 500s
and hangs, without touching the calls; one server of a fleet sends each run once."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from bridge_store.cli import parse_args
from bridge_store.cli.config import render
from bridge_store.cli.shared.serve_options import export_from
from bridge_store.errors import ConfigurationError
from bridge_store.run_traces import EXPORT_RUNS_ENV
from bridge_store.run_traces.ids import trace_id
from bridge_store.run_traces.mapping import SpanMaker
from bridge_store.run_traces.reading import RunRecord
from bridge_store.run_traces.settings import ExportSettings, export_backend, traces_endpoint
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running
from testkit.otlp import OtlpReceiver
from tests.support import history as h
from tests.support.server import StoreHttpClient, serve

TOKEN = "live-export-test-token"


def settings(receiver: OtlpReceiver) -> ExportSettings:
    """Quick rounds, so the tests need not wait the defaults."""
    return ExportSettings(
        traces_endpoint(receiver.url),
        settle_seconds=0.2,
        poll_seconds=0.1,
        lease_seconds=5.0,
        backoff_seconds=(0.1, 0.4),
    )


@contextmanager
def server(url: str, receiver: OtlpReceiver) -> Iterator[StoreHttpClient]:
    config = ServerConfig(
        routes=Routes.single(url), auth_token=TOKEN, export_runs=settings(receiver)
    )
    with running(create_app(config)) as base:
        client = StoreHttpClient(base + "/", TOKEN)
        try:
            yield client
        finally:
            client.close()


def metrics(client: StoreHttpClient) -> str:
    url = client._url.removesuffix("sdk.v1.SdkStoreCallbackService/CallStore") + "metrics"
    return httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else -1.0


def wait_for(done: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def end_runs(client: StoreHttpClient, count: int, *, agent_id: str = "agent-live") -> list[str]:
    """An agent and ``count`` runs, each created running then ended (finished)."""
    client.call("agents", "create", {"agent": h.agent(agent_id, "live", "/w", "idle", h.T0)})
    run_ids = [f"run-{n}" for n in range(count)]
    for turn, run_id in enumerate(run_ids, 1):
        client.call("runs", "create", {"run": h.run(agent_id, run_id, turn, "running")})
        body = {"type": "tool_call", "call_id": "c", "name": "grep", "status": "completed"}
        client.call("runEvents", "append", h.message(agent_id, run_id, body))
        ended = h.run(agent_id, run_id, turn, "finished", endedAt=h.T0 + turn * 60_000 + 500)
        client.call("runs", "update", {"run": ended})
    return run_ids


def sent_once(receiver: OtlpReceiver, tenant: str, agent_id: str, run_ids: list[str]) -> bool:
    """Whether each run's root span arrived, none twice so far."""
    roots = [span.trace_id for span in receiver.roots()]
    wanted = [f"{trace_id(tenant, agent_id, run_id):032x}" for run_id in run_ids]
    assert len(roots) == len(set(roots)), "a run was sent twice"
    return set(wanted) <= set(roots)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    made = OtlpReceiver()
    yield made
    made.stop()


def test_a_run_is_sent_once_it_ends_and_only_then(tmp_path: Path, receiver: OtlpReceiver) -> None:
    receiver.start()
    with server(f"sqlite:///{tmp_path / 's.db'}", receiver) as client:
        client.call("agents", "create", {"agent": h.agent("a", "live", "/w", "idle", h.T0)})
        client.call("runs", "create", {"run": h.run("a", "r-1", 1, "running")})
        time.sleep(1.0)  # five rounds: a running run is not sent
        assert receiver.spans == []
        client.call("runs", "update", {"run": h.run("a", "r-1", 1, "finished", endedAt=h.T0)})
        wait_for(lambda: sent_once(receiver, "default", "a", ["r-1"]))
        wait_for(lambda: metric(metrics(client), "bridge_store_runs_exported_total") == 1)
        # The store's queue is counted, and the lag taken, at each round's read of it.
        wait_for(lambda: metric(metrics(client), "bridge_store_run_export_lag_seconds") == 0)
        text = metrics(client)
        assert metric(text, 'bridge_store_run_export_queue_depth{queue="memory"}') == 0
        assert metric(text, 'bridge_store_run_export_queue_depth{queue="store"}') == 0
        assert metric(text, 'bridge_store_run_exports_dropped_total{reason="gone"}') == 0
    (root,) = receiver.roots()
    assert root.attributes["gen_ai.agent.id"] == "a"
    assert root.attributes["bridge_store.run.creator"] == "auth-token"  # the one token's name


def test_a_collector_down_throughout_then_up_gets_every_run_once(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    # Nothing listens on the receiver's port yet.
    with server(url, receiver) as client:
        run_ids = end_runs(client, 5)
        wait_for(lambda: metric(metrics(client), "bridge_store_run_export_retries_total") >= 3)
        text = metrics(client)
        assert metric(text, 'bridge_store_run_export_queue_depth{queue="store"}') == 5
        assert metric(text, "bridge_store_run_export_lag_seconds") > 0
        assert metric(text, "bridge_store_runs_exported_total") == 0
    # The server stopped with the collector still down: the runs wait in the store,
    # and the next server sends them once the collector is up.
    receiver.start()
    with server(url, receiver) as client:
        wait_for(lambda: sent_once(receiver, "default", "agent-live", run_ids))
        more = end_runs(client, 2, agent_id="agent-more")
        wait_for(lambda: sent_once(receiver, "default", "agent-more", more))
        time.sleep(1.0)  # rounds after: nothing is sent again
        assert sent_once(receiver, "default", "agent-live", run_ids)
        assert len(receiver.roots()) == 7
        wait_for(lambda: metric(metrics(client), "bridge_store_runs_exported_total") == 7)


@pytest.mark.parametrize("answer", [500, "hang"])
def test_a_failing_or_hanging_collector_leaves_the_calls_alone(
    tmp_path: Path,
    receiver: OtlpReceiver,
    answer: int | str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")
    receiver.answer = answer
    receiver.start()
    url = f"sqlite:///{tmp_path / 's.db'}"
    stopping = 0.0
    with server(url, receiver) as client:
        end_runs(client, 3)
        wait_for(lambda: len(receiver.requests) >= 1)
        # While the collector fails or holds a request, every call is answered.
        run_ids = end_runs(client, 20, agent_id="agent-during")
        listed = client.list_all("runs", {"agentIds": ["agent-during"]})
        assert [run["status"] for run in listed] == ["finished"] * 20
        assert len(run_ids) == 20
        stopping = time.monotonic()
    # A stop during a held export is bounded: the sender gives up, the queue stays.
    assert time.monotonic() - stopping < 15
    assert receiver.roots() == []
    receiver.answer = "ok"
    receiver.release()
    with server(url, receiver) as client:
        wait_for(lambda: len(receiver.roots()) == 23)


def test_a_run_the_collector_refuses_alone_is_dropped_and_the_rest_go(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    poison = f"{trace_id('default', 'agent-live', 'run-1'):032x}"
    receiver.refuse = {poison}
    receiver.start()
    with server(f"sqlite:///{tmp_path / 's.db'}", receiver) as client:
        run_ids = end_runs(client, 4)
        good = [run_id for run_id in run_ids if run_id != "run-1"]
        wait_for(lambda: sent_once(receiver, "default", "agent-live", good))
        wait_for(
            lambda: (
                metric(metrics(client), 'bridge_store_run_exports_dropped_total{reason="rejected"}')
                == 1
            )
        )
        # The depth is counted at each round's read of the queue: the next one says 0.
        wait_for(
            lambda: (
                metric(metrics(client), 'bridge_store_run_export_queue_depth{queue="store"}') == 0
            )
        )
    assert poison not in {span.trace_id for span in receiver.spans}


def test_a_run_whose_trace_cannot_be_made_is_dropped_and_said(
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    made = SpanMaker.spans

    def spans(self: SpanMaker, record: RunRecord) -> list[ReadableSpan]:
        if record.run["runId"] == "run-1":
            raise KeyError("a bug")
        return made(self, record)

    monkeypatch.setattr(SpanMaker, "spans", spans)
    receiver.start()
    with server(f"sqlite:///{tmp_path / 's.db'}", receiver) as client:
        run_ids = end_runs(client, 3)
        wait_for(lambda: sent_once(receiver, "default", "agent-live", ["run-0", "run-2"]))
        wait_for(
            lambda: (
                metric(metrics(client), 'bridge_store_run_export_queue_depth{queue="store"}') == 0
            )
        )
        assert (
            metric(metrics(client), 'bridge_store_run_exports_dropped_total{reason="failed"}') == 1
        )
    assert len(receiver.roots()) == 2
    assert len(run_ids) == 3
    assert "run export: run run-1 of agent agent-live has no trace" in caplog.text


def test_the_export_needs_a_backend_with_a_queue_and_leases() -> None:
    with pytest.raises(ConfigurationError, match="--export-runs keeps ended runs in the store"):
        export_backend(object(), "rec://x")


@pytest.mark.parametrize(
    "url", ["ftp://collector:4318", "collector:4318", "http://:4318", "http://host:port"]
)
def test_a_bad_url_is_one_line_naming_the_fix(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"http://localhost:4318|http\(s\)://HOST"):
        ExportSettings.to(url)


def test_secrets_in_the_url_never_reach_a_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ConfigurationError, match="has a query") as refused:
        ExportSettings.to("https://collector:4318/v1/traces?api_key=s3cret-query")
    assert "s3cret-query" not in str(refused.value)
    # A password is basic auth: the collector (down here) is named without it.
    down = OtlpReceiver()
    url = f"http://user:s3cret-pass@127.0.0.1:{down.port}"
    config = ServerConfig(
        routes=Routes.single(f"sqlite:///{tmp_path / 's.db'}"),
        auth_token=TOKEN,
        export_runs=dataclasses.replace(settings(down), endpoint=traces_endpoint(url)),
    )
    caplog.set_level("DEBUG")
    with running(create_app(config)) as base:
        client = StoreHttpClient(base + "/", TOKEN)
        end_runs(client, 1)
        wait_for(lambda: "did not take" in caplog.text)
        client.close()
    assert f"127.0.0.1:{down.port}" in caplog.text
    assert "s3cret-pass" not in caplog.text


def test_the_setting_comes_from_the_flag_the_environment_or_the_config_file(
    tmp_path: Path,
) -> None:
    env = {EXPORT_RUNS_ENV: "https://user:pw@collector.example:4318"}
    shown = render(parse_args(["config", "show"]), env)
    assert 'export-runs = "https://user:***@collector.example:4318"' in shown
    config_file = tmp_path / "serve.toml"
    config_file.write_text('export-runs = "http://collector:4318"\n')
    args = parse_args(["serve", "--config", str(config_file)])
    assert export_from(args, {}) == ExportSettings("http://collector:4318/v1/traces")
    # The environment wins over the file, the flag over both.
    assert export_from(args, env) is not None
    flagged = parse_args(["serve", "--export-runs", "http://other:4318/v1/traces"])
    assert export_from(flagged, env) == ExportSettings("http://other:4318/v1/traces")
    assert export_from(parse_args(["serve"]), {}) is None


def test_without_the_otel_extra_the_start_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else real(name, *a),
    )
    args = parse_args(["serve", "--export-runs", "http://collector:4318"])
    with pytest.raises(ConfigurationError, match=r"pip install 'bridge-store\[otel\]'"):
        export_from(args, {})


def test_serve_workers_2_sends_each_run_once(tmp_path: Path, receiver: OtlpReceiver) -> None:
    receiver.start()
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    with serve("--store", store, "--workers", "2", "--export-runs", receiver.url) as one:
        # Calls land on either worker; one worker holds the export lease.
        ended: dict[str, list[str]] = {}
        for n in range(4):
            client = one.new_client()
            ended[f"agent-{n}"] = end_runs(client, 3, agent_id=f"agent-{n}")
            client.close()

        def all_sent() -> bool:
            return all(sent_once(receiver, "default", a, ids) for a, ids in ended.items())

        wait_for(all_sent, 60)
        time.sleep(3.0)  # a few more rounds of both workers: nothing twice
        assert len(receiver.roots()) == 12
        assert len({span.trace_id for span in receiver.roots()}) == 12
