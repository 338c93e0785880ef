"""Agent activity as Prometheus series: runs finished, tokens, durations and tool calls,
by tenant, counted once, with label values bounded per tenant and in all; each tenant's
admin scrapes its own tenant's series alone, the operator every one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.ops.activity import (
    LABEL_CAPS,
    OTHER,
    OTHER_TENANTS,
    SERIES_CAPS,
    ActivityCollector,
    ActivityCounts,
)
from bridge_store.rpc.contract import new_event
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import METRICS_PATH, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes, open_stores
from testkit.inprocess import running

from .support.history import FINISHED_RUN, LOGIN_AGENT, history_calls, message, run
from .test_viewer_tenants import WRITE_A, WRITE_B, registry, store, team_b_calls

ADMIN = "metrics-operator-token"
ADMIN_A = "team-a-admin-token"
ADMIN_B = "team-b-admin-token"
ACTIVITY = (
    "bridge_store_runs_finished",
    "bridge_store_run_tokens",
    "bridge_store_tool_calls",
    "bridge_store_run_duration",
)


def tokens() -> TokenRegistry:
    entries = [
        *registry()._entries,  # the two tenants' writers and readers
        TokenEntry("ops", token_digest(ADMIN), "default", Scope.OPERATOR),
        TokenEntry("a-admin", token_digest(ADMIN_A), "team-a", Scope.ADMIN),
        TokenEntry("b-admin", token_digest(ADMIN_B), "team-b", Scope.ADMIN),
    ]
    return TokenRegistry(entries)


@pytest.fixture(params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    app = create_app(ServerConfig(routes=Routes.single(url), tokens=tokens()))
    with running(app) as base:
        yield base


def scrape(base: str, token: str = ADMIN) -> str:
    response = httpx.get(base + METRICS_PATH, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.text


def samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = scrape(base)
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
    team_a = counts.tenants["team-a"]
    named = {key[0] for key in team_a.tool_calls}
    assert len(named) == LABEL_CAPS["tool"] + 1
    assert team_a.tool_calls[(OTHER, "completed")] == 20
    # A value no label should carry (too long, or not a name) is other from the start.
    counts.tool_call("team-a", ("x" * 100, True))
    counts.tool_call("team-a", ("a\x00b", True))
    assert team_a.tool_calls[(OTHER, "error")] == 2
    for n in range(LABEL_CAPS["model"] + 5):
        doc = run("agent", f"run-{n}", 1, "finished", model={"id": f"model-{n}"})
        counts.run_written("team-a", doc)
    assert sum(v for (status, model), v in team_a.runs.items() if model == OTHER) == 5


def finished(tenant: str, model: str) -> dict[str, Any]:
    return run(f"agent-{tenant}", f"run-{model}", 1, "finished", model={"id": model})


def test_one_tenant_past_its_caps_leaves_another_s_new_model_and_tool_named() -> None:
    """The caps were shared: after team-a's 60 models and 110 tools, team-b's first
    model and tool were only "other"."""
    counts = ActivityCounts()
    for n in range(60):
        counts.run_written("team-a", finished("team-a", f"model-{n}"))
    for n in range(110):
        counts.tool_call("team-a", (f"tool-{n}", False))
    counts.run_written("team-b", finished("team-b", "model-b"))
    counts.tool_call("team-b", ("tool_b", True))
    assert counts.tenants["team-b"].runs == {("finished", "model-b"): 1}
    assert counts.tenants["team-b"].tool_calls == {("tool_b", "error"): 1}
    # team-a's own caps still hold.
    team_a = counts.tenants["team-a"]
    assert team_a.runs[("finished", OTHER)] == 60 - LABEL_CAPS["model"]
    assert team_a.tool_calls[(OTHER, "completed")] == 110 - LABEL_CAPS["tool"]


def test_past_the_global_bound_every_tenant_s_new_values_are_other() -> None:
    counts = ActivityCounts()
    # Tenants at their own caps until the values kept across tenants reach the bound.
    full = SERIES_CAPS["tool"] // LABEL_CAPS["tool"]
    assert full == SERIES_CAPS["model"] // LABEL_CAPS["model"]
    for t in range(full):
        for n in range(LABEL_CAPS["tool"]):
            counts.tool_call(f"t{t}", (f"tool-{n}", False))
        for n in range(LABEL_CAPS["model"]):
            counts.run_written(f"t{t}", finished(f"t{t}", f"model-{n}"))
    counts.tool_call("late", ("tool-new", False))
    counts.run_written("late", finished("late", "model-new"))
    assert counts.tenants["late"].tool_calls == {(OTHER, "completed"): 1}
    assert counts.tenants["late"].runs == {("finished", OTHER): 1}
    # Values already kept stay named, for their tenant.
    counts.tool_call("t0", ("tool-0", True))
    assert counts.tenants["t0"].tool_calls[("tool-0", "error")] == 1
    every = list(ActivityCollector(counts).collect())
    named_tools = {
        sample.labels["tool"]
        for family in every
        for sample in family.samples
        if "tool" in sample.labels and sample.labels["tool"] != OTHER
    }
    assert len(named_tools) == LABEL_CAPS["tool"]  # the same names, in several tenants
    series = sum(len(family.samples) for family in every)
    assert series < 18_000


def test_tenants_past_the_cap_count_together_as_no_tenant_s_own() -> None:
    counts = ActivityCounts()
    for t in range(LABEL_CAPS["tenant"] + 2):
        counts.tool_call(f"tenant-{t}", ("grep", False))
    assert len(counts.tenants) == LABEL_CAPS["tenant"]
    assert counts.others.name == OTHER_TENANTS
    assert counts.others.tool_calls == {("grep", "completed"): 2}
    collector = ActivityCollector(counts)
    late = f"tenant-{LABEL_CAPS['tenant']}"
    assert all(not family.samples for family in collector.collect_tenant(late))
    tenants = {s.labels["tenant"] for f in collector.collect() for s in f.samples}
    assert OTHER_TENANTS in tenants
    assert late not in tenants


TEAM_B_SECRETS = ("secret-model-b", "secret_tool_b", "team-b", "beta")


def team_b_activity() -> list[tuple[str, str, dict[str, Any]]]:
    ended = run("agent-beta", "run-b", 1, "finished", model={"id": "secret-model-b"}, endedAt=2_000)
    tool = {"type": "tool_call", "call_id": "b", "name": "secret_tool_b", "status": "completed"}
    return [
        ("runs", "create", {"run": ended}),
        ("runEvents", "append", message("agent-beta", "run-b", tool)),
    ]


def test_a_tenant_admin_scrapes_its_own_series_and_the_operator_every_one(server: str) -> None:
    """/metrics with team-a's admin token listed team-b by name, with its model ids,
    tool names and counts."""
    store(server, WRITE_A, history_calls())
    store(server, WRITE_B, team_b_activity())
    own = scrape(server, ADMIN_A)
    for secret in TEAM_B_SECRETS:
        assert secret not in own
    families = {family.name: family for family in text_string_to_metric_families(own)}
    # A store with per-day sums (SQLite) adds the tenant's runs and failures of the last
    # two weeks (ops/spend.py; tests/test_spend_metrics.py), of team-a alone too.
    assert set(families) - {"bridge_store_tenant_runs", "bridge_store_tenant_failed_runs"} == {
        "bridge_store_runs_finished",
        "bridge_store_run_tokens",
        "bridge_store_tool_calls",
        "bridge_store_run_duration_seconds",
    }
    tenants = {s.labels["tenant"] for family in families.values() for s in family.samples}
    assert tenants == {"team-a"}
    # No figure that another tenant's calls add to: calls, bytes, the process.
    assert "bridge_store_calls_total" not in own
    assert "process_" not in own
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families.values()
        for s in family.samples
    }
    tools = "bridge_store_tool_calls_total"
    assert value(found, tools, tool="read_file", status="completed", tenant="team-a") == 1
    # team-b's admin sees its own, and nothing of team-a's.
    theirs = scrape(server, ADMIN_B)
    assert "secret_tool_b" in theirs
    assert "team-a" not in theirs
    assert "read_file" not in theirs
    # The operator sees both tenants, and the server's own figures.
    every = scrape(server, ADMIN)
    for expected in ("team-a", "read_file", *TEAM_B_SECRETS[:3], "bridge_store_calls_total"):
        assert expected in every
    # A token below admin is refused, naming the scope it lacks.
    refused = httpx.get(server + METRICS_PATH, headers={"Authorization": f"Bearer {WRITE_A}"})
    assert refused.status_code == 403
    assert refused.text == "this token lacks the admin scope /metrics needs (it has write)\n"


async def test_an_append_that_ends_no_tool_call_hands_back_the_backend_s_own_call() -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    try:
        counts = ActivityCounts()
        events = opened.stores.layered([counts]).run_events
        plain = events.append(
            "t", new_event(message("a", "r", {"type": "task", "text": "x"}), "in")
        )
        # The backend's coroutine itself, not a wrapper awaiting it.
        assert plain.cr_code is opened.stores.run_events.append.__code__  # type: ignore[attr-defined]
        await plain
        tool = {"type": "tool_call", "call_id": "c", "name": "grep", "status": "completed"}
        await events.append("t", new_event(message("a", "r", tool), "in"))
        assert counts.tenants["t"].tool_calls == {("grep", "completed"): 1}
    finally:
        await opened.close()
