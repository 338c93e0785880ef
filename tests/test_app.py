"""The ASGI app: health check, store lifecycle in the lifespan, per-substore routing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from bridge_store import hookimpl
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import HEALTH_PATH, create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store_memory import MemoryBackend
from testkit.inprocess import running

TOKEN = "app-test-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


class RecordingBackend(MemoryBackend):
    """A memory backend that records its lifecycle into a shared journal."""

    def __init__(self, url: str, journal: list[str], *, fail_start: bool = False) -> None:
        super().__init__()
        self.url = url
        self.journal = journal
        self.fail_start = fail_start

    async def start(self, *, migrate: bool) -> None:
        self.journal.append(f"start {self.url} migrate={migrate}")
        if self.fail_start:
            raise RuntimeError(f"cannot reach {self.url}")

    async def close(self) -> None:
        self.journal.append(f"close {self.url}")


class RecordingPlugin:
    """Serves ``rec://NAME`` URLs; ``rec://broken`` fails to start."""

    def __init__(self) -> None:
        self.journal: list[str] = []
        self.backends: dict[str, RecordingBackend] = {}

    @hookimpl
    def bridge_store_url_schemes(self) -> Sequence[str]:
        return ["rec"]

    @hookimpl
    def bridge_store_open_backend(self, url: str) -> RecordingBackend | None:
        parts = urlsplit(url)
        if parts.scheme != "rec":
            return None
        backend = RecordingBackend(url, self.journal, fail_start=parts.netloc == "broken")
        self.backends[url] = backend
        return backend


def config(routes: Routes, *, migrate: bool = True) -> ServerConfig:
    return ServerConfig(routes=routes, auth_token=TOKEN, migrate=migrate)


def call(base_url: str, substore: str, method: str, data: Any) -> Any:
    response = httpx.post(
        base_url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers=AUTH,
        timeout=10.0,
    )
    assert response.status_code == 200, response.text
    return response.json().get("output")


def test_healthz_needs_no_token() -> None:
    with running(create_app(config(Routes.single("memory://")))) as base_url:
        response = httpx.get(base_url + HEALTH_PATH)
        assert (response.status_code, response.json()) == (200, {"status": "ok"})
        assert httpx.post(base_url + HEALTH_PATH).status_code == 405


def test_default_plugin_manager_serves_built_in_backends() -> None:
    with running(create_app(config(Routes.single("memory://")))) as base_url:
        event = call(base_url, "runEvents", "append", {"runId": "r1", "eventType": "e"})
        assert (event["seq"], event["offset"]) == (1, "1")


@pytest.mark.parametrize("migrate", [True, False])
def test_lifespan_starts_each_backend_once_and_closes_them(migrate: bool) -> None:
    plugin = RecordingPlugin()
    routes = Routes(agents="rec://a", runs="rec://b", run_events="rec://b", checkpoints="rec://a")
    app = create_app(
        config(routes, migrate=migrate), plugin_manager=get_plugin_manager(plugins=[plugin])
    )
    with running(app) as base_url:
        assert plugin.journal == [
            f"start rec://a migrate={migrate}",
            f"start rec://b migrate={migrate}",
        ]
        call(base_url, "agents", "get", {"agentId": "x"})
    assert plugin.journal[2:] == ["close rec://b", "close rec://a"]


def test_each_substore_reaches_its_routed_backend() -> None:
    plugin = RecordingPlugin()
    routes = Routes(
        agents="rec://agents", runs="memory://", run_events="rec://events", checkpoints="memory://"
    )
    app = create_app(config(routes), plugin_manager=get_plugin_manager(plugins=[plugin]))
    agent: dict[str, Any] = {
        "agentId": "routed",
        "cwd": "/w",
        "status": "idle",
        "activeRunId": None,
        "name": None,
        "createdAt": 1,
        "updatedAt": 1,
        "sdkMetadata": {},
    }
    with running(app) as base_url:
        call(base_url, "agents", "create", {"agent": agent})
        call(base_url, "runEvents", "append", {"runId": "run-1", "eventType": "e"})
    # Read the backends directly once the server has stopped (memory keeps the data).
    agents_backend = plugin.backends["rec://agents"]
    events_backend = plugin.backends["rec://events"]
    assert asyncio.run(agents_backend.agents.get("default", "routed")) == agent
    assert asyncio.run(events_backend.agents.get("default", "routed")) is None
    events = asyncio.run(events_backend.run_events.list("default", "run-1", after_seq=0, limit=10))
    assert [event["seq"] for event in events] == [1]


async def test_failed_start_closes_what_started_and_fails_startup() -> None:
    plugin = RecordingPlugin()
    routes = Routes(
        agents="rec://ok", runs="rec://broken", run_events="rec://ok", checkpoints="rec://ok"
    )
    app = create_app(config(routes), plugin_manager=get_plugin_manager(plugins=[plugin]))
    with pytest.raises(RuntimeError, match="cannot reach rec://broken"):
        async with app.starlette.router.lifespan_context(app.starlette):
            pytest.fail("the app must not start")
    assert plugin.journal == [
        "start rec://ok migrate=True",
        "start rec://broken migrate=True",
        "close rec://ok",
    ]


async def test_calls_and_health_before_startup_are_unavailable() -> None:
    app = create_app(config(Routes.single("memory://")))
    # ASGITransport runs no lifespan: the stores were never opened.
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.post(
            CALL_STORE_PATH,
            json={"substore": "agents", "method": "get", "input": {"agentId": "x"}},
            headers=AUTH,
        )
        health = await client.get(HEALTH_PATH)
    assert response.status_code == 503
    assert response.json()["code"] == "unavailable"
    assert (health.status_code, health.json()) == (503, {"status": "starting"})
