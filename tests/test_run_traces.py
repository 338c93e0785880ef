"""Runs as traces, read back by an OTLP/HTTP receiver in the test (opentelemetry-proto):
every attribute name and value, the links and times, content off and on, no secret,
ids that are the same on every export, and hostile documents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

from bridge_store.cli import main
from bridge_store.run_traces import conventions as c
from bridge_store.run_traces.ids import ROOT, span_id, trace_id
from bridge_store.run_traces.mapping import MAX_TIME_MS
from testkit.otlp import OtlpReceiver, ReceivedSpan
from tests.support import history as h
from tests.support.run_traces import (
    NOW_AGENT,
    NOW_RUN,
    SECRET_KEY,
    fill,
    now_run_calls,
    now_run_end,
    now_started,
)

CONTENT_ENV = c.CAPTURE_CONTENT_ENV


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    started = OtlpReceiver().start()
    yield started
    started.stop()


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store: the viewer's synthetic history (a finished run with tool calls, a
    failed run, a live one) and a run around now, stored by token alice."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    started = now_started()
    fill(url, [*h.history_calls(), *now_run_calls(started), *now_run_end(started)])
    return url


def export(store: str, receiver: OtlpReceiver, *extra: str) -> int:
    return main(["export-runs", "--store", store, "--to", receiver.url, *extra])


def root_of(spans: list[ReceivedSpan]) -> ReceivedSpan:
    (root,) = [span for span in spans if not span.parent_span_id]
    return root


def test_the_names_are_the_installed_conventions() -> None:
    known = {value for name, value in vars(gen_ai_attributes).items() if name.startswith("GEN_AI_")}
    assert set(c.GEN_AI_NAMES) <= known
    assert c.SCHEMA_URL.endswith(c.SEMCONV_VERSION)


def test_a_finished_run_is_a_trace_of_the_run_and_its_tool_calls(
    store: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agents-team-a")
    assert export(store, receiver) == 0
    traces = receiver.traces()
    # The finished, the failed and the now run; the live one has not ended.
    assert len(traces) == 3
    spans = traces[f"{trace_id('default', h.LOGIN_AGENT, h.FINISHED_RUN):032x}"]
    root = root_of(spans)
    assert root.name == "invoke_agent fix login"
    assert root.span_id == f"{span_id('default', h.LOGIN_AGENT, h.FINISHED_RUN, ROOT):016x}"
    assert root.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "cursor",
        "gen_ai.agent.id": h.LOGIN_AGENT,
        "gen_ai.agent.name": "fix login",
        "gen_ai.conversation.id": h.LOGIN_AGENT,
        "gen_ai.request.model": "composer-2",
        # The conventions' input tokens include the cached ones.
        "gen_ai.usage.input_tokens": 1200 + 800 + 16,
        "gen_ai.usage.output_tokens": 340,
        "gen_ai.usage.cache_read.input_tokens": 800,
        "gen_ai.usage.cache_creation.input_tokens": 16,
        "bridge_store.run.id": h.FINISHED_RUN,
        "bridge_store.run.turn_number": 1,
        "bridge_store.run.status": "finished",
        "bridge_store.run.creator": "alice",
        "bridge_store.agent.workspace": "/src/app",
    }
    assert root.kind == 1  # SPAN_KIND_INTERNAL
    assert root.status_code == 0  # unset: it did not fail
    assert root.start_ns == (h.T0 + 60_000) * 1_000_000
    assert root.end_ns == (h.T0 + 60_000 + 83_500) * 1_000_000
    assert root.resource["service.name"] == "agents-team-a"
    assert root.resource["bridge_store.tenant"] == "default"
    assert root.scope == "bridge_store.run_traces"
    assert root.schema_url == c.SCHEMA_URL
    tools = {span.name: span for span in spans if span.parent_span_id}
    assert set(tools) == {"execute_tool read_file", "execute_tool run_terminal_cmd"}
    read = tools["execute_tool read_file"]
    assert read.parent_span_id == root.span_id
    assert read.trace_id == root.trace_id
    assert (
        read.span_id
        == f"{span_id('default', h.LOGIN_AGENT, h.FINISHED_RUN, 'tool', 'call-read'):016x}"
    )
    assert read.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.id": "call-read",
        "bridge_store.tool_call.status": "completed",
    }
    assert read.status_code == 0
    assert read.start_ns <= read.end_ns
    failed = tools["execute_tool run_terminal_cmd"]
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status_code == 2  # error


def test_a_failed_run_says_its_error(store: str, receiver: OtlpReceiver) -> None:
    assert export(store, receiver) == 0
    spans = receiver.traces()[f"{trace_id('default', h.LOGIN_AGENT, h.FAILED_RUN):032x}"]
    root = root_of(spans)
    assert root.attributes["error.type"] == "permission_denied"
    assert root.attributes["bridge_store.run.status"] == "error"
    assert root.status_code == 2
    assert root.status_message == "[permission_denied] HTTP 403"
    assert "gen_ai.usage.input_tokens" not in root.attributes  # it reported no usage


def test_tool_calls_lie_within_their_run(store: str, receiver: OtlpReceiver) -> None:
    assert export(store, receiver) == 0
    spans = receiver.traces()[f"{trace_id('default', NOW_AGENT, NOW_RUN):032x}"]
    root = root_of(spans)
    (tool,) = [span for span in spans if span.parent_span_id == root.span_id]
    assert root.start_ns <= tool.start_ns <= tool.end_ns <= root.end_ns
    assert root.attributes["gen_ai.usage.input_tokens"] == 13


def test_content_goes_only_when_asked_for_and_secrets_never(
    store: str, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    assert export(store, receiver) == 0
    without = json.dumps([span.attributes for span in receiver.spans])
    for content in (h.PROMPT, h.ANSWER, "routes/login.py", "router first", "List the files"):
        assert content not in without
    receiver.spans.clear()
    monkeypatch.setenv(CONTENT_ENV, "True")
    assert export(store, receiver) == 0
    spans = receiver.traces()[f"{trace_id('default', h.LOGIN_AGENT, h.FINISHED_RUN):032x}"]
    root = root_of(spans)
    assert json.loads(root.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": h.PROMPT}]}
    ]
    [output] = json.loads(root.attributes["gen_ai.output.messages"])
    assert output["role"] == "assistant"
    assert output["finish_reason"] == "stop"
    assert output["parts"] == [
        {"type": "reasoning", "content": "Looking at the router first."},
        {"type": "text", "content": "I'll read the router."},
        {"type": "text", "content": h.ANSWER},
    ]
    read = next(span for span in spans if span.name == "execute_tool read_file")
    assert json.loads(read.attributes["gen_ai.tool.call.arguments"]) == {"path": "routes/login.py"}
    # The 400-line result is past the bound: its start, cut.
    result = read.attributes["gen_ai.tool.call.result"]
    assert result.startswith("   0 | line 0 of routes/login.py")
    assert result.endswith("…")
    assert len(result) == 8192
    everything = json.dumps([(span.attributes, span.resource) for span in receiver.spans])
    assert SECRET_KEY not in everything
    assert "ab" * 32 not in everything
    assert "sdkMetadata" not in everything
    assert "blobEncryptionKey" not in everything


def test_every_export_is_the_same_traces(store: str, receiver: OtlpReceiver) -> None:
    assert export(store, receiver) == 0
    first = sorted((s.trace_id, s.span_id, s.parent_span_id, s.start_ns) for s in receiver.spans)
    receiver.spans.clear()
    assert export(store, receiver) == 0
    again = sorted((s.trace_id, s.span_id, s.parent_span_id, s.start_ns) for s in receiver.spans)
    assert first == again
    assert len(first) == 6


def test_each_tenant_is_its_own_resource_and_its_own_traces(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    url = f"sqlite:///{tmp_path / 'two.db'}"
    started = now_started()
    both = [*now_run_calls(started), *now_run_end(started)]
    fill(url, both)
    fill(url, both, tenant="team-b", who="bob")
    assert export(url, receiver) == 0
    by_tenant = {span.resource["bridge_store.tenant"]: span for span in receiver.spans}
    assert set(by_tenant) == {"default", "team-b"}
    assert by_tenant["default"].trace_id != by_tenant["team-b"].trace_id
    receiver.spans.clear()
    assert export(url, receiver, "--tenant", "team-b") == 0
    assert {span.resource["bridge_store.tenant"] for span in receiver.spans} == {"team-b"}
    assert root_of(receiver.spans).attributes["bridge_store.run.creator"] == "bob"


@pytest.mark.parametrize(
    ("times", "start_ms", "end_ms"),
    [
        # Negative and past int64 nanoseconds: the next time of each chain.
        ({"startedAt": -5, "createdAt": 1_000, "endedAt": 2**53, "updatedAt": 5_000}, 1_000, 5_000),
        # Nothing usable: both ends at the one time there is.
        ({"startedAt": None, "createdAt": -1, "endedAt": -2, "updatedAt": 2**53}, 0, 0),
        # An end before the start: the start.
        ({"startedAt": 9_000, "createdAt": 9_000, "endedAt": 10, "updatedAt": 20}, 9_000, 9_000),
        # The last time spans can carry.
        ({"startedAt": MAX_TIME_MS, "endedAt": MAX_TIME_MS}, MAX_TIME_MS, MAX_TIME_MS),
    ],
)
def test_hostile_times_are_sent_as_the_documented_fallback(
    tmp_path: Path,
    receiver: OtlpReceiver,
    times: dict[str, int | None],
    start_ms: int,
    end_ms: int,
) -> None:
    url = f"sqlite:///{tmp_path / 'times.db'}"
    doc = h.run(h.LOGIN_AGENT, "run-times", 1, "finished")
    doc.update(times)
    agent = h.agent(h.LOGIN_AGENT, "\ud800 bidi \u202e <b>x</b> \x00", "/w", "idle", 1)
    fill(url, [("agents", "create", {"agent": agent}), ("runs", "create", {"run": doc})])
    assert export(url, receiver) == 0
    (root,) = receiver.spans
    assert (root.start_ns, root.end_ns) == (start_ms * 1_000_000, end_ms * 1_000_000)
    # A lone surrogate is replaced; the rest of the name is kept as it is.
    assert root.name == "invoke_agent ? bidi \u202e <b>x</b> \x00"


def test_a_megabyte_error_and_a_thousand_tool_calls_are_bounded(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    url = f"sqlite:///{tmp_path / 'big.db'}"
    doc = h.run(h.LOGIN_AGENT, "run-big", 1, "error", error="x" * 1_048_576)
    calls: list[h.Call] = [
        ("agents", "create", {"agent": h.agent(h.LOGIN_AGENT, "big", "/w", "idle", 1)}),
        ("runs", "create", {"run": doc}),
    ]
    for n in range(1003):
        body = {"type": "tool_call", "call_id": f"c{n}", "name": "t", "status": "completed"}
        calls.append(("runEvents", "append", h.message(h.LOGIN_AGENT, "run-big", body)))
    fill(url, calls)
    assert export(url, receiver) == 0
    root = root_of(receiver.spans)
    assert len(root.status_message) == 1024
    assert root.attributes["error.type"] == "error"
    assert root.attributes["bridge_store.run.tool_calls_left_out"] == 3
    assert len(receiver.spans) == 1001


def test_a_dry_run_sends_nothing_and_counts(
    store: str, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export(store, receiver, "--dry-run") == 0
    assert receiver.requests == []
    out = capsys.readouterr().out
    assert out.startswith("would send 3 runs (6 spans, ")
    assert "1 run not ended yet left out" in out


def test_since_and_agent_choose_the_runs(store: str, receiver: OtlpReceiver) -> None:
    # The synthetic history started in May 2026; only the run around now is this week's.
    assert export(store, receiver, "--since", "7d") == 0
    assert {span.attributes.get("gen_ai.agent.id") for span in receiver.spans} == {NOW_AGENT, None}
    receiver.spans.clear()
    assert export(store, receiver, "--agent", h.LOGIN_AGENT, "--until", "2026-05-28") == 0
    assert len(receiver.traces()) == 2


def test_a_collector_that_refuses_stops_the_command_with_one_line(
    store: str,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("bridge_store.run_traces.replay.RETRY_DELAYS", (0.01,))
    receiver.answer = 500
    assert export(store, receiver) != 0
    err = capsys.readouterr().err
    assert "did not take 3 runs after 2 tries" in err
    assert len(receiver.requests) == 2


def test_a_run_of_more_events_than_read_is_sent_with_what_was_read(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bridge_store.run_traces.reading.MAX_EVENTS", 3)
    url = f"sqlite:///{tmp_path / 'long.db'}"
    calls: list[h.Call] = [
        ("agents", "create", {"agent": h.agent(h.LOGIN_AGENT, "long", "/w", "idle", 1)}),
        ("runs", "create", {"run": h.run(h.LOGIN_AGENT, "run-long", 1, "finished")}),
    ]
    for n in range(5):
        body = {"type": "tool_call", "call_id": f"c{n}", "name": "t", "status": "completed"}
        calls.append(("runEvents", "append", h.message(h.LOGIN_AGENT, "run-long", body)))
    fill(url, calls)
    assert export(url, receiver) == 0
    root = root_of(receiver.spans)
    assert root.attributes["bridge_store.run.events_cut"] is True
    assert len(receiver.spans) == 1 + 3
