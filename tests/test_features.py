"""Optional backend features are protocols in one module (bridge_store/features.py),
found with isinstance: a backend without one is served without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bridge_store.backend.features import Leases, PoolFigures, ReadinessProbe
from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.backend.substores import Backend
from bridge_store.errors import ConfigurationError
from bridge_store.lifecycle.retain import RetentionSettings
from bridge_store.ops.readiness import ServedBackend, probe
from bridge_store.server.app import BridgeStoreServer
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import ResolvedStores, Routes, resolve


class Plain:
    """A backend of the required methods only (its substores borrowed from memory)."""

    def __init__(self) -> None:
        inner = open_backend(get_plugin_manager(), "memory://")
        self.agents, self.runs = inner.agents, inner.runs
        self.run_events, self.checkpoints = inner.run_events, inner.checkpoints
        self.revisions = 0

    async def start(self, *, migrate: bool) -> None: ...

    async def close(self) -> None: ...

    async def upgrade_schema(self) -> None: ...

    async def schema_revision(self) -> str | None:
        self.revisions += 1
        return None


@pytest.mark.parametrize("scheme", ["memory", "sqlite"])
def test_the_built_in_backends_implement_the_probe_and_the_pool_figures(
    scheme: str, tmp_path: Path
) -> None:
    url = "memory://" if scheme == "memory" else f"sqlite:///{tmp_path / 'store.db'}"
    backend = open_backend(get_plugin_manager(), url)
    assert isinstance(backend, ReadinessProbe)
    assert isinstance(backend, PoolFigures)


def test_a_backend_without_the_features_is_probed_by_its_schema_and_has_no_leases() -> None:
    plain = Plain()
    assert not isinstance(plain, ReadinessProbe | PoolFigures | Leases)
    backend: Backend = plain
    assert asyncio.run(probe(ServedBackend("plain://", ("agents",), backend), 1.0)) is None
    assert plain.revisions == 1
    # Served from plain://, with the substores it borrowed.
    memory = resolve(get_plugin_manager(), Routes.single("memory://"))
    resolved = ResolvedStores({"plain://": plain}, memory.stores)
    config = ServerConfig(
        routes=Routes.single("plain://"),
        auth_token="a-token-of-sixteen-chars",
        retain=RetentionSettings(older_than=86_400.0),
    )
    with pytest.raises(ConfigurationError, match="--retain needs leases"):
        BridgeStoreServer(config, resolved=resolved)
    # Without --retain it serves, and its metrics show no pool.
    served = BridgeStoreServer(
        ServerConfig(routes=Routes.single("plain://"), auth_token="a-token-of-sixteen-chars"),
        resolved=resolved,
    )
    assert served.metrics is not None
