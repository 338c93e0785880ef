"""``serve --retain``: background pruning, one server of a fleet at a time, in metrics and logs."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bridge_store.backend.features import Leases
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import Backend
from bridge_store.cli import parse_args
from bridge_store.cli.config import render
from bridge_store.cli.shared.store_options import routes_from
from bridge_store.errors import ConfigurationError
from bridge_store.lifecycle.retain import (
    LEASE_NAME,
    Retention,
    RetentionSettings,
    lease_backend,
)
from bridge_store.stack.stores import OpenStores, Routes, resolve
from tests.support.retention import OTHER_TENANT, agent_ids, seed
from tests.support.server import ServerProcess, serve
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments

NINETY_DAYS = 90 * 86_400.0


def leases(backend: Backend) -> Leases:
    """``backend`` as the lease holder retention takes (every built-in one is)."""
    assert isinstance(backend, Leases)
    return backend


def routes_of(arguments: list[str]) -> Routes:
    return routes_from(parse_args(["prune", *arguments, "--older-than", "1d"]), {})


@asynccontextmanager
async def open_twice(routes: Routes) -> AsyncIterator[tuple[OpenStores, OpenStores]]:
    """The stores of ``routes`` opened by two "servers", each with its own backends."""
    first = await resolve(get_plugin_manager(), routes).start(migrate=True)
    second = await resolve(get_plugin_manager(), routes).start(migrate=True)
    try:
        yield first, second
    finally:
        await second.close()
        await first.close()


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
async def test_two_servers_race_and_one_prunes(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    routes = routes_of(serve_arguments(kind, request, tmp_path))
    async with open_twice(routes) as (one, two):
        await seed(one.stores)
        settings = RetentionSettings(older_than=NINETY_DAYS)
        servers = [
            Retention(opened.stores, leases(opened.backends[0]), settings, holder=f"server-{n}")
            for n, opened in enumerate((one, two))
        ]
        with caplog.at_level(logging.INFO, logger="bridge_store.retention"):
            outcomes = await asyncio.gather(*(server.run_pass() for server in servers))
        assert sorted(outcomes) == ["pruned", "skipped"]
        pruner = servers[outcomes.index("pruned")]
        assert pruner.counts.agents == 3
        assert pruner.counts.runs == 4
        assert pruner.counts.blobs == 4
        assert pruner.counts.last_success is not None
        assert await agent_ids(two.stores) == {"old-busy", "fresh"}
        assert await agent_ids(two.stores, OTHER_TENANT) == set()
        lines = [r.getMessage() for r in caplog.records if r.name == "bridge_store.retention"]
        assert any(
            re.fullmatch(
                r"retention pass: pruned 3 agents not updated for 90d \(4 runs, 4 blobs\) "
                r"in [\d.]+ s; 1 with an active run kept",
                line,
            )
            for line in lines
        ), lines
        assert "retention pass skipped: another server holds the retention lease" in lines
        # The lease was released: the other server takes the next pass.
        loser = servers[outcomes.index("skipped")]
        assert await loser.run_pass() == "pruned"
        assert loser.counts.agents == 0


async def test_a_pass_stops_when_the_lease_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = Routes.single("memory://")
    opened = await resolve(get_plugin_manager(), routes).start(migrate=True)
    await seed(opened.stores)
    backend = leases(opened.backends[0])
    retention = Retention(opened.stores, backend, RetentionSettings(NINETY_DAYS), holder="me")
    # Every renewal is due, and another server has taken the lease meanwhile.
    monkeypatch.setattr("bridge_store.lifecycle.retain.LEASE_SECONDS", 0.0)
    real_acquire = backend.acquire_lease
    calls = 0

    async def stolen(name: str, holder: str, seconds: float) -> bool:
        nonlocal calls
        calls += 1
        return calls == 1 and await real_acquire(name, holder, seconds)

    monkeypatch.setattr(backend, "acquire_lease", stolen)
    assert await retention.run_pass() == "pruned"
    # Not one agent was deleted after the lease was lost.
    assert retention.counts.agents == 0
    assert len(await agent_ids(opened.stores)) == 4
    await opened.close()


async def test_a_failed_pass_is_counted_and_the_lease_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = Routes.single("memory://")
    opened = await resolve(get_plugin_manager(), routes).start(migrate=True)
    backend = leases(opened.backends[0])

    async def outage() -> list[str]:
        from bridge_store.errors import unavailable

        raise unavailable("the database is down")

    stores = opened.stores
    monkeypatch.setattr(stores.agents, "tenants", outage)
    retention = Retention(stores, backend, RetentionSettings(NINETY_DAYS), holder="me")
    assert await retention.run_pass() == "failed"
    assert retention.counts.passes == {"pruned": 0, "skipped": 0, "failed": 1}
    assert await backend.acquire_lease(LEASE_NAME, "someone-else", 60) is True
    await opened.close()


def test_retain_needs_a_backend_with_leases() -> None:
    class Leaseless:
        """A third-party backend without the optional lease methods."""

    with pytest.raises(ConfigurationError, match="--retain needs leases"):
        lease_backend(Leaseless(), "thirdparty://x")  # type: ignore[arg-type]


def test_retain_settings_round_trip_through_config_show(tmp_path: Path) -> None:
    args = parse_args(["config", "show", "--retain", "90d", "--retain-every", "30m"])
    shown = render(args, {})
    assert 'retain = "90d"' in shown
    assert 'retain-every = "30m"' in shown
    config_file = tmp_path / "serve.toml"
    config_file.write_text('retain = "12w"\n')
    args = parse_args(["serve", "--config", str(config_file)])
    assert (args.retain, args.retain_every) == ("12w", "1h")
    with pytest.raises(SystemExit):
        parse_args(["serve", "--retain", "forever"])


def scrape(server: ServerProcess) -> str:
    headers = {"Authorization": f"Bearer {server.token}"}
    return httpx.get(f"{server.url}metrics", headers=headers, timeout=10).text


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_serve_retain_prunes_in_the_background_on_a_fleet(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = serve_arguments("sqlite", request, tmp_path)

    async def seeded() -> None:
        opened = await resolve(get_plugin_manager(), routes_of(store)).start(migrate=True)
        try:
            await seed(opened.stores)
        finally:
            await opened.close()

    asyncio.run(seeded())
    flags = ["--retain", "90d", "--retain-every", "1s", "--log-format", "json"]
    with serve(*store, *flags) as one, serve(*store, *flags) as two:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            texts = [scrape(one), scrape(two)]
            passes = [
                metric(t, 'bridge_store_retention_passes_total{outcome="pruned"}') for t in texts
            ]
            if all(count >= 2 for count in passes):
                break
            time.sleep(0.5)
        agents = [metric(t, "bridge_store_retention_agents_pruned_total") for t in texts]
        assert sum(agents) == 3, texts
        assert all(
            metric(t, "bridge_store_retention_last_success_timestamp_seconds") > 0 for t in texts
        )
        assert metric(texts[0], 'bridge_store_retention_passes_total{outcome="failed"}') == 0
        listed = one.call("agents", "list", {})
        assert sorted(agent["agentId"] for agent in listed["items"]) == ["fresh", "old-busy"]
    logged = "\n".join(one.stderr_lines + two.stderr_lines)
    assert "retention pass: pruned 3 agents not updated for 90d" in logged
    # The audit log names retention as the deleter.
    assert '"token": "retention"' in logged or '\\"token\\": \\"retention\\"' in logged


async def test_a_pass_is_bounded_and_stopping_cancels_it_and_releases_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = await resolve(get_plugin_manager(), Routes.single("memory://")).start(migrate=True)
    await seed(opened.stores)
    backend = leases(opened.backends[0])
    stuck = asyncio.Event()

    async def hangs(*args: object, **kwargs: object) -> list[object]:
        stuck.set()
        await asyncio.Event().wait()  # a backend that never answers
        return []

    monkeypatch.setattr(opened.stores.agents, "list", hangs)
    # Bounded: a pass never outlasts the interval.
    short = Retention(opened.stores, backend, RetentionSettings(NINETY_DAYS, 0.3), holder="a")
    started = time.monotonic()
    assert await short.run_pass() == "failed"
    assert 0.3 <= time.monotonic() - started < 5
    assert await backend.acquire_lease(LEASE_NAME, "b", 60) is True
    await backend.release_lease(LEASE_NAME, "b")
    # Cancellable: stopping the server stops a pass under way and frees the lease.
    stuck.clear()
    retention = Retention(opened.stores, backend, RetentionSettings(NINETY_DAYS, 1.0), holder="a")
    retention.start()
    await asyncio.wait_for(stuck.wait(), 5)
    assert await backend.acquire_lease(LEASE_NAME, "b", 60) is False
    await asyncio.wait_for(retention.stop(), 5)
    assert await backend.acquire_lease(LEASE_NAME, "b", 60) is True
    await opened.close()
