"""deploy/grafana/bridge-store.json and the documented PromQL read only metrics the app exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bridge_store.lifecycle.retain import RetentionSettings
from bridge_store.server.app import METRICS_PATH, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.inprocess import running
from tests.support.history import history_calls

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "bridge-store.json"
TOKEN = "dashboard-test-token"
#: A metric name in a PromQL expression (labels, functions and keywords never match).
METRIC = re.compile(r"\b((?:bridge_store|process)_[a-z_]+)\b")


def exported_names(tmp_path: Path) -> set[str]:
    """Every series name the app can export: sample names and, for families that have
    no sample yet, the names their samples will take."""
    # With --retain, whose series exist only then (its first pass is minutes away).
    config = ServerConfig(
        routes=Routes.single(f"sqlite:///{tmp_path / 'store.db'}"),
        auth_token=TOKEN,
        retain=RetentionSettings(older_than=90 * 86_400.0),
    )
    app = create_app(config)
    with running(app) as base_url:
        text = httpx.get(base_url + METRICS_PATH, headers={"authorization": f"Bearer {TOKEN}"}).text
    names: set[str] = set()
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    for family in text_string_to_metric_families(text):
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in suffixes.get(family.type, [""]))
    return names


def expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [expr for value in node.values() for expr in expressions(value)]
    if isinstance(node, list):
        return [expr for value in node for expr in expressions(value)]
    return []


def test_the_dashboard_reads_only_exported_metrics(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used = {name for expr in expressions(dashboard) for name in METRIC.findall(expr)}
    assert used - exported_names(tmp_path) == set()
    # It covers what the issue asks a dashboard to show.
    assert {
        "bridge_store_calls_total",
        "bridge_store_call_duration_seconds_bucket",
        "bridge_store_calls_in_flight",
        "bridge_store_backend_up",
        "bridge_store_backend_errors_total",
        "bridge_store_pool_in_use",
        "bridge_store_pool_waits_total",
        # Agent activity.
        "bridge_store_runs_finished_total",
        "bridge_store_run_tokens_total",
        "bridge_store_run_duration_seconds_bucket",
        "bridge_store_tool_calls_total",
    } <= used


def test_every_panel_queries_the_chosen_data_source() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert panels
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_documented_promql_reads_only_exported_metrics(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "observability.md").read_text()
    blocks = re.findall(r"```promql\n(.*?)```", page, re.S)
    assert blocks, "docs/observability.md shows example PromQL"
    used = {name for block in blocks for name in METRIC.findall(block)}
    assert "bridge_store_call_duration_seconds_bucket" in used
    assert used - exported_names(tmp_path) == set()


def test_the_agent_activity_row_groups_and_selects_by_labels_its_series_carry() -> None:
    """Each activity panel's ``by (...)`` and ``{...}`` labels are labels of the series
    it reads, as the app exports them after a tenant's runs (job and instance are
    Prometheus's own)."""
    from .test_activity_metrics import ACTIVITY, ADMIN, tokens
    from .test_viewer_tenants import WRITE_A, store

    app = create_app(ServerConfig(routes=Routes.single("memory://"), tokens=tokens()))
    with running(app) as base_url:
        store(base_url, WRITE_A, history_calls())
        text = httpx.get(base_url + METRICS_PATH, headers={"authorization": f"Bearer {ADMIN}"}).text
    carried: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(ACTIVITY):
                carried.setdefault(sample.name, set()).update(sample.labels)
    dashboard = json.loads(DASHBOARD.read_text())
    checked = 0
    for expr in expressions(dashboard):
        read = [name for name in METRIC.findall(expr) if name.startswith(ACTIVITY)]
        if not read:
            continue
        assert all(name in carried for name in read), (read, sorted(carried))
        labels = set.union(*(carried[name] for name in read)) | {"job", "instance"}
        grouped = {
            name.strip()
            for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr)
            for name in group.split(",")
            if name.strip()
        }
        selected = {
            name
            for selector in re.findall(r"\{([^}]*)\}", expr)
            for name in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector)
        }
        assert grouped | selected <= labels, (expr, sorted(labels))
        checked += 1
    assert checked >= 6  # the row's panels: runs, failures, tokens, durations, tool calls
