"""Backends are plugins: built-ins load by entry point, outside plugins plug in the same way."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

import pluggy
import pytest

from bridge_store import hookimpl
from bridge_store.backend.plugins import get_plugin_manager, known_schemes, open_backend
from bridge_store.conformance import AgentConformance
from bridge_store.conformance.harness import DEFAULT_PRINCIPAL as ADMIN
from bridge_store.errors import ConfigurationError
from bridge_store.rpc.dispatch import call_store
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.types import Document
from bridge_store_memory import MemoryBackend


class AgentsOnlyBackend:
    """An outside backend that only keeps agents, and records what it was asked."""

    def __init__(self) -> None:
        self.inner = MemoryBackend()
        self.agents = self.inner.agents
        self.runs = None
        self.run_events = None
        self.checkpoints = None
        self.created: list[str] = []
        self.started_with: list[bool] = []
        self.closed = False

    async def start(self, *, migrate: bool) -> None:
        self.started_with.append(migrate)

    async def close(self) -> None:
        self.closed = True

    async def upgrade_schema(self) -> None:
        """No schema."""

    async def schema_revision(self) -> str | None:
        return None


class OutsidePlugin:
    """A plugin defined outside the package, claiming the ``outside://`` scheme."""

    def __init__(self) -> None:
        self.backend = AgentsOnlyBackend()

    @hookimpl
    def bridge_store_url_schemes(self) -> Sequence[str]:
        return ["outside"]

    @hookimpl
    def bridge_store_open_backend(self, url: str) -> AgentsOnlyBackend | None:
        return self.backend if urlsplit(url).scheme == "outside" else None


class TestAnOutsideAgentsOnlyBackendConforms(AgentConformance):
    """A third party's backend of one substore runs only that substore's suite."""

    @pytest.fixture
    def plugin_manager(self) -> pluggy.PluginManager:
        return get_plugin_manager(plugins=[OutsidePlugin()])

    @pytest.fixture
    def store_url(self) -> str:
        return "outside://team"

    def test_only_agents_go_to_the_backend_under_test(self) -> None:
        routes = self.routes("outside://team")
        assert routes.agents == "outside://team"
        assert {routes.runs, routes.run_events, routes.checkpoints} == {"memory://"}


def test_built_in_backends_register_through_entry_points() -> None:
    manager = get_plugin_manager()
    names = {name for name, _ in manager.list_name_plugin()}
    assert {"memory", "sql", "redis", "s3"} <= names
    assert {"memory", "sqlite", "postgresql", "redis", "s3"} <= set(known_schemes(manager))


def test_without_entry_points_nothing_is_known() -> None:
    manager = get_plugin_manager(load_entry_points=False)
    with pytest.raises(ConfigurationError, match="no installed backend serves memory://"):
        open_backend(manager, "memory://")


def test_unknown_scheme_and_missing_scheme_are_configuration_errors() -> None:
    manager = get_plugin_manager()
    with pytest.raises(ConfigurationError, match=r"no installed backend serves nope://.*memory"):
        open_backend(manager, "nope://x")
    with pytest.raises(ConfigurationError, match="has no scheme"):
        open_backend(manager, "just-a-path.db")


async def test_outside_plugin_serves_a_routed_substore() -> None:
    plugin = OutsidePlugin()
    manager = get_plugin_manager(plugins=[plugin])
    routes = Routes(
        agents="outside://team", runs="memory://", run_events="memory://", checkpoints="memory://"
    )
    opened = await open_stores(manager, routes, migrate=True)
    agent: Document = {"agentId": "a1", "cwd": "/w", "updatedAt": 1}
    run: Document = {"runId": "r1", "agentId": "a1", "turnNumber": 1}
    await call_store(opened.stores, "agents", "create", {"agent": agent}, principal=ADMIN)
    await call_store(opened.stores, "runs", "create", {"run": run}, principal=ADMIN)
    # The agent went to the outside backend, the run to the memory backend.
    assert await plugin.backend.agents.get("default", "a1") == agent
    assert plugin.backend.started_with == [True]
    fetched, _ = await call_store(
        opened.stores, "runs", "get", {"agentId": "a1", "runId": "r1"}, principal=ADMIN
    )
    assert fetched is not None
    await opened.close()
    assert plugin.backend.closed


async def test_routing_a_substore_to_a_backend_without_it_is_refused() -> None:
    manager = get_plugin_manager(plugins=[OutsidePlugin()])
    with pytest.raises(ConfigurationError, match="does not provide the runs substore"):
        await open_stores(manager, Routes.single("outside://x"), migrate=False)


def test_one_backend_per_distinct_url() -> None:
    routes = Routes(
        agents="memory://", runs="memory://", run_events="x://", checkpoints="memory://"
    )
    assert routes.urls() == ["memory://", "x://"]


def test_loading_every_backend_plugin_imports_no_storage_library() -> None:
    # Plugins load for every command; their libraries must wait for a URL that needs
    # them, so `serve --store memory://` or `--help` never pays for (or requires) them.
    code = (
        "import sys; from bridge_store.backend.plugins import get_plugin_manager, known_schemes; "
        "import bridge_store.cli, bridge_store.server.app; known_schemes(get_plugin_manager()); "
        "print(sorted(set(sys.modules) & {'sqlalchemy', 'alembic', 'aiosqlite', 'asyncpg', "
        "'redis', 'obstore', 'botocore', 'cursor_sdk'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
