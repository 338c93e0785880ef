"""Arize Phoenix as the receiver: the real bridge's runs, live, and recorded traffic,
replayed, read back from Phoenix's own REST API and shown in its UI.

``phoenix serve`` runs from its own virtualenv (``scripts/ensure-phoenix``) with its
own working directory and free ports. Phoenix 15.10 and newer read the GenAI
conventions: ``invoke_agent`` spans become AGENT spans, ``execute_tool`` TOOL spans,
and the usage its token counts (``llm.token_count.*``), beside the attributes as sent.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright

from bridge_store.cli import main
from bridge_store.client import BridgeProcess, launch_bridge, local_options
from bridge_store.run_traces.ids import trace_id
from bridge_store.security.auth import SHORTHAND_TOKEN_NAME
from testkit.cursor_api import MODEL_ID, CursorApiStub
from tests.support import history as h
from tests.support.phoenix import Phoenix, running_phoenix
from tests.support.run_traces import as_a_bridge_writes, fill, recorded_writes, retimed
from tests.support.server import ServerProcess, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.bridge,
    pytest.mark.usefixtures("the_installed_bridge"),
]

ROOT = Path(__file__).resolve().parent.parent
TRAFFIC = ROOT / "bench" / "data" / "bridge-traffic.jsonl"
ARTIFACTS = ROOT / "test-artifacts" / "phoenix"
CHROMIUM = "/usr/bin/chromium"
API_KEY = "phoenix-api-key"


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as started:
        yield started


def project_env(project: str) -> dict[str, str]:
    """The runs go to a Phoenix project of their own (its resource attribute)."""
    return {"OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}


def by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["context"]["trace_id"], []).append(span)
    return traces


def root_of(spans: list[dict[str, Any]]) -> dict[str, Any]:
    (root,) = [span for span in spans if span["parent_id"] is None]
    return root


def start_bridge(server: ServerProcess, project: Path, env: dict[str, str]) -> BridgeProcess:
    return launch_bridge(
        server.url, server.token, workspace=project, state_root=project.parent / "state", env=env
    )


def test_the_real_bridges_runs_arrive_live_with_tool_calls_tokens_and_errors(
    phoenix: Phoenix, cursor_api: CursorApiStub, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    home = tmp_path / "home"
    project.mkdir()
    home.mkdir()
    bridge_env = {"CURSOR_BACKEND_URL": cursor_api.url, "HOME": str(home)}
    store = f"sqlite:///{tmp_path / 'live.db'}"
    options = {"model": MODEL_ID, "api_key": API_KEY, "local": local_options(project)}
    with (
        serve("--store", store, "--export-runs", phoenix.url, env=project_env("live")) as server,
        start_bridge(server, project, bridge_env) as bridge,
        bridge.client() as client,
    ):
        agent = client.agents.create(options, name="phoenix agent")
        # The offline stand-in refuses the model call: the run ends in error.
        result = agent.send("hello").wait()
        assert result.status == "error"
        # Runs with tool calls and usage, stored through CallStore as a bridge would.
        started = int(time.time() * 1000)
        for substore, method, data in as_a_bridge_writes(retimed(h.history_calls(), started)):
            server.call(substore, method, data)
        # The bridge's run; the finished run and its two tool calls; the failed run.
        spans = phoenix.wait_for_spans("live", 5)
    traces = by_trace(spans)
    assert len(spans) == 5
    assert len(traces) == 3

    bridge_run = root_of(traces[f"{trace_id('default', agent.agent_id, result.id):032x}"])
    assert bridge_run["name"] == "invoke_agent phoenix agent"
    assert bridge_run["span_kind"] == "AGENT"
    assert bridge_run["status_code"] == "ERROR"
    # The offline stand-in answers the model call "unauthenticated" (client/offline_api.py).
    assert bridge_run["status_message"].startswith("[unauthenticated] no model runs offline")
    attributes = bridge_run["attributes"]
    assert attributes["gen_ai.agent.id"] == agent.agent_id
    assert attributes["gen_ai.request.model"] == MODEL_ID
    assert attributes["error.type"] == "unauthenticated"
    assert attributes["bridge_store.run.creator"] == SHORTHAND_TOKEN_NAME
    assert attributes["bridge_store.agent.workspace"] == str(project)

    finished = traces[f"{trace_id('default', h.LOGIN_AGENT, h.FINISHED_RUN):032x}"]
    root = root_of(finished)
    assert (root["name"], root["span_kind"], root["status_code"]) == (
        "invoke_agent fix login",
        "AGENT",
        "UNSET",
    )
    tools = sorted(
        (span["name"], span["span_kind"], span["status_code"])
        for span in finished
        if span["parent_id"] == root["context"]["span_id"]
    )
    assert tools == [
        ("execute_tool read_file", "TOOL", "UNSET"),
        ("execute_tool run_terminal_cmd", "TOOL", "ERROR"),
    ]
    # The tokens, as sent and as Phoenix counts them.
    assert root["attributes"]["gen_ai.usage.input_tokens"] == 1200 + 800 + 16
    assert root["attributes"]["gen_ai.usage.output_tokens"] == 340
    assert root["attributes"]["llm.token_count.prompt"] == 2016
    assert root["attributes"]["llm.token_count.completion"] == 340
    assert root["attributes"]["llm.token_count.prompt_details.cache_read"] == 800

    failed = root_of(traces[f"{trace_id('default', h.LOGIN_AGENT, h.FAILED_RUN):032x}"])
    assert (failed["status_code"], failed["status_message"]) == (
        "ERROR",
        "[permission_denied] HTTP 403",
    )
    screenshot_of_the_run(phoenix, "live", root["context"]["trace_id"])


def screenshot_of_the_run(phoenix: Phoenix, project: str, trace: str) -> None:
    """Phoenix's own page of the trace shows the run and its tool calls (the screenshot
    in docs/observability.md is this one's)."""
    subprocess.run([str(ROOT / "scripts" / "ensure-browser")], check=True)
    url = f"{phoenix.url}/projects/{phoenix.project_id(project)}/traces/{trace}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            for name in ("execute_tool read_file", "execute_tool run_terminal_cmd"):
                expect(page.get_by_text(name, exact=True).first).to_be_visible(timeout=60_000)
            expect(page.get_by_text("gen_ai.usage.input_tokens").first).to_be_visible()
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "run.png"))
        finally:
            browser.close()


def test_a_replay_of_recorded_traffic_fills_phoenix_and_again_adds_nothing(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'imported.db'}"
    writes = recorded_writes(TRAFFIC)
    fill(store, writes, who="bridge")
    for name, value in project_env("replay").items():
        monkeypatch.setenv(name, value)
    assert main(["export-runs", "--store", store, "--to", phoenix.url]) == 0
    spans = phoenix.wait_for_spans("replay", 2)
    # The recorded traffic ends two runs of agent "first", both refused offline.
    ended = [
        data["run"]
        for substore, method, data in writes
        if substore == "runs" and method == "update" and data["run"]["status"] == "error"
    ]
    assert len(ended) == 2
    assert len(spans) == 2
    for run in ended:
        (span,) = [
            s
            for s in spans
            if s["context"]["trace_id"]
            == f"{trace_id('default', run['agentId'], run['runId']):032x}"
        ]
        assert span["name"] == "invoke_agent first"
        assert span["status_code"] == "ERROR"
        assert span["status_message"] == run["error"]
        assert span["attributes"]["bridge_store.run.creator"] == "bridge"
        assert span["attributes"]["gen_ai.conversation.id"] == run["agentId"]
    # Sent again: the same traces, which Phoenix keeps once.
    assert main(["export-runs", "--store", store, "--to", phoenix.url]) == 0
    assert len(phoenix.wait_for_spans("replay", 3, seconds=5)) == 2
