"""Agent activity as Prometheus series: runs finished, tokens, durations and tool calls,
by tenant, counted once, with bounded label values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.app import METRICS_PATH, create_app
from bridge_store.config import ServerConfig
from bridge_store.contract import new_event
from bridge_store.ops.activity import LABEL_CAPS, OTHER, ActivityCounts
from bridge_store.plugins import get_plugin_manager
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.stores import Routes, open_stores
from testkit.inprocess import running

from .support.history import FINISHED_RUN, LOGIN_AGENT, history_calls, message, run
from .test_viewer_tenants import WRITE_A, WRITE_B, registry, store, team_b_calls

ADMIN = "metrics-admin-token"
ACTIVITY = (
    "bridge_store_runs_finished",
    "bridge_store_run_tokens",
    "bridge_store_tool_calls",
    "bridge_store_run_duration",
)


def tokens() -> TokenRegistry:
    entries = [
        *registry()._entries,  # the two tenants' writers and readers
        TokenEntry("ops", token_digest(ADMIN), "default", Scope.ADMIN),
    ]
    return TokenRegistry(entries)


@pytest.fixture(params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    app = create_app(ServerConfig(routes=Routes.single(url), tokens=tokens()))
    with running(app) as base:
        yield base


def samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(base + METRICS_PATH, headers={"Authorization": f"Bearer {ADMIN}"}).text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(ACTIVITY):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def test_runs_tokens_durations_and_tool_calls_by_tenant(server: str) -> None:
    store(server, WRITE_A, history_calls())
    store(server, WRITE_B, team_b_calls())
    found = samples(server)
    runs = "bridge_store_runs_finished_total"
    assert value(found, runs, status="finished", model="composer-2", tenant="team-a") == 1
    assert value(found, runs, status="error", model="composer-2", tenant="team-a") == 1
    # Team B's finished run is its own series; its running one is not counted.
    assert value(found, runs, status="finished", model="composer-2", tenant="team-b") == 1
    tokens_total = "bridge_store_run_tokens_total"
    assert value(found, tokens_total, kind="input", model="composer-2", tenant="team-a") == 1200
    assert value(found, tokens_total, kind="cache_write", model="composer-2", tenant="team-a") == 16
    assert value(found, tokens_total, kind="input", model="composer-2", tenant="team-b") is None
    tools = "bridge_store_tool_calls_total"
    assert value(found, tools, tool="read_file", status="completed", tenant="team-a") == 1
    assert value(found, tools, tool="run_terminal_cmd", status="error", tenant="team-a") == 1
    assert not [key for key in found if key[0] == tools and ("tenant", "team-b") in key[1]]
    count = "bridge_store_run_duration_seconds_count"
    assert value(found, count, model="composer-2", tenant="team-a") == 2
    assert value(
        found, "bridge_store_run_duration_seconds_sum", model="composer-2", tenant="team-a"
    ) == pytest.approx(84.4)
    # The 83.5 s run is in the 120 s bucket and not the 60 s one.
    bucket = "bridge_store_run_duration_seconds_bucket"
    assert value(found, bucket, model="composer-2", tenant="team-a", le="60.0") == 1
    assert value(found, bucket, model="composer-2", tenant="team-a", le="120.0") == 2


def test_replays_and_later_updates_count_nothing_more(server: str) -> None:
    store(server, WRITE_A, history_calls())
    before = samples(server)
    ended = run(LOGIN_AGENT, FINISHED_RUN, 1, "finished", endedAt=1, usage={"inputTokens": 9})
    failing = {"type": "tool_call", "call_id": "k", "name": "grep", "status": "error"}
    keyed = {**message(LOGIN_AGENT, FINISHED_RUN, failing), "idempotencyKey": "once"}
    store(server, WRITE_A, [("runs", "update", {"run": ended}), ("runEvents", "append", keyed)])
    store(server, WRITE_A, [("runEvents", "append", keyed)])  # the bridge's retry
    after = samples(server)
    grep = (
        "bridge_store_tool_calls_total",
        (("status", "error"), ("tenant", "team-a"), ("tool", "grep")),
    )
    assert after.pop(grep) == 1
    assert after == before


def test_label_values_are_capped_with_other_past_the_cap() -> None:
    counts = ActivityCounts()
    for n in range(LABEL_CAPS["tool"] + 20):
        counts.tool_call("team-a", (f"tool-{n}", False))
    named = {key[0] for key in counts.tool_calls}
    assert len(named) == LABEL_CAPS["tool"] + 1
    assert counts.tool_calls[(OTHER, "completed", "team-a")] == 20
    # A value no label should carry (too long, or not a name) is other from the start.
    counts.tool_call("team-a", ("x" * 100, True))
    counts.tool_call("team-a", ("a\x00b", True))
    assert counts.tool_calls[(OTHER, "error", "team-a")] == 2
    for n in range(LABEL_CAPS["model"] + 5):
        doc = run("agent", f"run-{n}", 1, "finished", model={"id": f"model-{n}"})
        counts.run_written("team-a", doc)
    assert sum(v for (status, model, _), v in counts.runs.items() if model == OTHER) == 5


async def test_an_append_that_ends_no_tool_call_hands_back_the_backend_s_own_call() -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        counts = ActivityCounts()
        events = counts.metered(opened.stores).run_events
        plain = events.append(
            "t", new_event(message("a", "r", {"type": "task", "text": "x"}), "in")
        )
        # The backend's coroutine itself, not a wrapper awaiting it.
        assert plain.cr_code is opened.stores.run_events.append.__code__  # type: ignore[attr-defined]
        await plain
        tool = {"type": "tool_call", "call_id": "c", "name": "grep", "status": "completed"}
        await events.append("t", new_event(message("a", "r", tool), "in"))
        assert counts.tool_calls == {("grep", "completed", "t"): 1}
    finally:
        await opened.close()
