"""availability.py: outages and recoveries logged once per transition, per backend."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from bridge_store.backend.hookspecs import hookimpl
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.errors import unavailable
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.types import Document
from bridge_store_memory import MemoryBackend
from bridge_store_memory.backend import MemoryAgents
from testkit.inprocess import running
from tests.test_metrics import AUTH, TOKEN, scrape, value

# scrape() authenticates with test_metrics' token: the app here takes the same one.
FLAKY_URL = "flaky://store:hunter2-secret@db.internal/team"


class FlakyAgents(MemoryAgents):
    """Memory agents that answer ``unavailable`` while ``down`` is set."""

    down = False

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        if FlakyAgents.down:
            raise unavailable("connection refused (test)")
        return await super().get(tenant, agent_id)


class FlakyPlugin:
    @hookimpl
    def bridge_store_url_schemes(self) -> Sequence[str]:
        return ["flaky"]

    @hookimpl
    def bridge_store_open_backend(self, url: str) -> MemoryBackend | None:
        if urlsplit(url).scheme != "flaky":
            return None
        backend = MemoryBackend()
        backend.agents = FlakyAgents()
        return backend


def status_of(base_url: str, substore: str, method: str, data: Any) -> int:
    response = httpx.post(
        base_url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers=AUTH,
        timeout=10.0,
    )
    return response.status_code


def test_an_outage_and_its_recovery_are_logged_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="bridge_store.ops.availability")
    routes = Routes(
        agents=FLAKY_URL, runs="memory://", run_events="memory://", checkpoints=FLAKY_URL
    )
    app = create_app(
        ServerConfig(routes=routes, auth_token=TOKEN),
        plugin_manager=get_plugin_manager(plugins=[FlakyPlugin()]),
    )
    flaky = app.availability.backends["flaky://store:***@db.internal/team"]
    FlakyAgents.down = False
    try:
        with running(app) as base_url:
            assert status_of(base_url, "agents", "get", {"agentId": "a"}) == 200
            FlakyAgents.down = True
            for _ in range(5):
                assert status_of(base_url, "agents", "get", {"agentId": "a"}) == 503
            assert not flaky.up
            # A client's mistake, and another backend answering, change nothing.
            assert status_of(base_url, "agents", "get", {"agentId": ""}) == 400
            assert status_of(base_url, "runs", "get", {"agentId": "a", "runId": "r"}) == 200
            assert not flaky.up
            FlakyAgents.down = False
            for _ in range(3):
                assert status_of(base_url, "agents", "get", {"agentId": "a"}) == 200
            assert flaky.up
            FlakyAgents.down = True
            assert status_of(base_url, "agents", "get", {"agentId": "a"}) == 503
            metrics = scrape(base_url)
    finally:
        FlakyAgents.down = False
    lines = [
        (record.levelname, record.getMessage())
        for record in caplog.records
        if record.name == "bridge_store.ops.availability"
    ]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING"]
    assert lines[0][1] == (
        "flaky://store:***@db.internal/team is unavailable: connection refused (test)"
    )
    assert lines[1][1].startswith("flaky://store:***@db.internal/team answers again after ")
    assert "hunter2" not in caplog.text
    assert flaky.outages == 2
    assert app.availability.backends["memory://"].up
    # The same state, for Prometheus: labelled by scheme and substores, never the URL.
    flaky_labels = {"scheme": "flaky", "substore": "agents,checkpoints"}
    assert value(metrics, "bridge_store_backend_up", **flaky_labels) == 0
    assert (
        value(metrics, "bridge_store_backend_errors_total", **flaky_labels, kind="unavailable") == 6
    )
    memory = {"scheme": "memory", "substore": "runs,runEvents"}
    assert value(metrics, "bridge_store_backend_up", **memory) == 1
