"""GET /readyz: 200 only while every backend answers its probe at the latest schema."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from bridge_store import hookimpl
from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.errors import unavailable
from bridge_store.ops.readiness import DETAIL_HINT, READY_PATH
from bridge_store.security.auth import Scope, TokenEntry, TokenRegistry, token_digest
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store_memory import MemoryBackend
from testkit.inprocess import running
from tests.support.postgres import TcpProxy
from tests.support.proxy import FaultyProxy
from tests.support.server import serve

TOKEN = "readiness-test-token"
#: Probes of a served store per check: each on a new connection, so under ``--workers
#: 2`` either worker may answer any of them.
PROBES = 8


class ProbedBackend(MemoryBackend):
    """A memory backend whose probe answers what the test says (``None``: ready)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer: str | None = None
        self.outage = False
        self.hang = False

    async def readiness(self) -> str | None:
        if self.hang:
            await asyncio.sleep(3600)
        if self.outage:
            raise unavailable("connection refused by the probed store")
        return self.answer


class LegacyBackend:
    """A backend written before readiness existed: only its schema question is asked."""

    def __init__(self) -> None:
        memory = MemoryBackend()
        self.agents, self.runs = memory.agents, memory.runs
        self.run_events, self.checkpoints = memory.run_events, memory.checkpoints
        self.schema_questions = 0
        self.broken = False

    async def start(self, *, migrate: bool) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    async def upgrade_schema(self) -> None:
        """No schema."""

    async def schema_revision(self) -> str | None:
        self.schema_questions += 1
        if self.broken:
            raise RuntimeError("password=hunter2 leaked into an exception")
        return None


class Plugin:
    def __init__(self) -> None:
        self.probed = ProbedBackend()
        self.legacy = LegacyBackend()

    @hookimpl
    def bridge_store_url_schemes(self) -> Sequence[str]:
        return ["probed", "legacy"]

    @hookimpl
    def bridge_store_open_backend(self, url: str) -> ProbedBackend | LegacyBackend | None:
        scheme = urlsplit(url).scheme
        if scheme == "probed":
            return self.probed
        return self.legacy if scheme == "legacy" else None


@pytest.fixture
def plugin() -> Plugin:
    return Plugin()


@pytest.fixture
def base_url(plugin: Plugin) -> Iterator[str]:
    routes = Routes(
        agents="probed://user:pw@store-host/x",
        runs="probed://user:pw@store-host/x",
        run_events="legacy://",
        checkpoints="memory://",
    )
    app = create_app(
        ServerConfig(routes=routes, auth_token=TOKEN),
        plugin_manager=get_plugin_manager(plugins=[plugin]),
    )
    with running(app) as url:
        yield url


def readyz(base_url: str, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    """The status and body of /readyz; asked with an admin ``token``, the detailed one."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    response = httpx.get(base_url.rstrip("/") + READY_PATH, headers=headers, timeout=30.0)
    return response.status_code, response.json()


def test_ready_names_every_backend_with_its_substores_and_redacted_url(
    base_url: str, plugin: Plugin
) -> None:
    assert readyz(base_url) == (
        200,
        {
            "status": "ready",
            "backends": [
                {
                    "scheme": "probed",
                    "substores": ["agents", "runs"],
                    "url": "probed://user:***@store-host/x",
                    "ready": True,
                },
                {"scheme": "legacy", "substores": ["runEvents"], "url": "legacy://", "ready": True},
                {
                    "scheme": "memory",
                    "substores": ["checkpoints"],
                    "url": "memory://",
                    "ready": True,
                },
            ],
        },
    )
    # Asked on every poll, not remembered.
    readyz(base_url)
    assert plugin.legacy.schema_questions >= 2


def test_readyz_without_an_admin_token_says_only_ready_or_not_per_backend_kind(
    plugin: Plugin,
) -> None:
    """Hosts, users, database names, prefixes and reasons are for admins only."""
    routes = Routes(
        agents="probed://dbuser:pw@db-host.internal:5432/bridge_db?prefix=team-secret",
        runs="probed://dbuser:pw@db-host.internal:5432/bridge_db?prefix=team-secret",
        run_events="legacy://",
        checkpoints="memory://",
    )
    admin, reader = "admin-token-0123456789", "reader-token-0123456789"
    tokens = TokenRegistry(
        [
            TokenEntry("ops", token_digest(admin), "default", Scope.ADMIN),
            TokenEntry("bridge", token_digest(reader), "team-a", Scope.WRITE),
        ]
    )
    app = create_app(
        ServerConfig(routes=routes, tokens=tokens),
        plugin_manager=get_plugin_manager(plugins=[plugin]),
    )
    plugin.probed.answer = "cannot reach db-host.internal:5432 as dbuser"
    with running(app) as url:
        for token in (None, reader, "not-a-token-at-all-xyz"):
            status, body = readyz(url, token)
            assert status == 503
            assert body == {
                "status": "unready",
                "backends": [
                    {"scheme": "probed", "ready": False},
                    {"scheme": "legacy", "ready": True},
                    {"scheme": "memory", "ready": True},
                ],
                "detail": DETAIL_HINT,
            }
            for detail in ("db-host", "dbuser", "bridge_db", "team-secret", "agents"):
                assert detail not in str(body)
        status, body = readyz(url, admin)
        assert status == 503
        assert (
            body["backends"][0]["url"] == "probed://dbuser:***@db-host.internal:5432/bridge_db?***"
        )
        assert body["backends"][0]["reason"] == "cannot reach db-host.internal:5432 as dbuser"
        plugin.probed.answer = None
        assert readyz(url, None) == (
            200,
            {
                "status": "ready",
                "backends": [
                    {"scheme": "probed", "ready": True},
                    {"scheme": "legacy", "ready": True},
                    {"scheme": "memory", "ready": True},
                ],
                "detail": DETAIL_HINT,
            },
        )


def test_one_backend_not_ready_makes_the_store_unready(base_url: str, plugin: Plugin) -> None:
    plugin.probed.answer = "schema at revision 0001, not 0002"
    status, body = readyz(base_url)
    assert (status, body["status"]) == (503, "unready")
    probed, legacy, memory = body["backends"]
    assert (probed["ready"], probed["reason"]) == (False, "schema at revision 0001, not 0002")
    assert legacy["ready"]
    assert memory["ready"]
    assert "reason" not in legacy

    plugin.probed.answer = None
    plugin.probed.outage = True
    status, body = readyz(base_url)
    assert status == 503
    assert body["backends"][0]["reason"] == "connection refused by the probed store"

    plugin.probed.outage = False
    assert readyz(base_url)[0] == 200


def test_a_probe_that_hangs_is_bounded_by_the_backend_timeout(plugin: Plugin) -> None:
    routes = Routes(
        agents="probed://store-host/x",
        runs="memory://",
        run_events="memory://",
        checkpoints="memory://",
    )
    config = ServerConfig(routes=routes, auth_token=TOKEN, backend_timeout=0.2)
    app = create_app(config, plugin_manager=get_plugin_manager(plugins=[plugin]))
    plugin.probed.hang = True
    with running(app) as url:
        started = time.monotonic()
        status, body = readyz(url)
        waited = time.monotonic() - started
    assert status == 503
    assert body["backends"][0]["reason"] == "no answer within 0.2 s"
    assert body["backends"][1]["ready"]
    assert waited < 2.0


def test_a_failing_probe_names_only_the_exception_type(base_url: str, plugin: Plugin) -> None:
    plugin.legacy.broken = True
    status, body = readyz(base_url)
    assert status == 503
    assert body["backends"][1]["reason"] == "the probe failed (RuntimeError)"
    assert "hunter2" not in str(body)


async def test_not_ready_before_the_stores_are_open() -> None:
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    transport = httpx.ASGITransport(app=app)  # runs no lifespan
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.get(READY_PATH)
    assert (response.status_code, response.json()) == (503, {"status": "starting", "backends": []})


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    "scheme", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_schema_missing_is_unready_until_upgraded(
    tmp_path: Path, request: pytest.FixtureRequest, scheme: str, workers: str
) -> None:
    """Every worker of ``serve --workers 2`` says the same: each probe asks on a new
    connection, which either worker may take."""
    if scheme == "sqlite":
        url = f"sqlite:///{tmp_path / 'empty.db'}"
        (tmp_path / "empty.db").touch(mode=0o600)  # --no-migrate creates no database
    else:
        url = request.getfixturevalue("make_postgres_url")()
    with serve("--store", url, "--no-migrate", "--workers", workers) as server:
        for _ in range(PROBES):
            status, body = readyz(server.url, server.token)
            assert status == 503
            (backend,) = body["backends"]
            assert backend["scheme"] == scheme
            assert backend["reason"].startswith("schema at revision (none), not ")
            assert "bridge-store db upgrade" in backend["reason"]
            # /healthz stays liveness: the process answers.
            assert httpx.get(server.url + "healthz").status_code == 200

        upgrade = [sys.executable, "-m", "bridge_store", "db", "upgrade", "--store", url]
        subprocess.run(upgrade, check=True, capture_output=True, timeout=120)
        assert [readyz(server.url)[0] for _ in range(PROBES)] == [200] * PROBES


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    forwarder = TcpProxy()
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


def ready_again(base_url: str) -> bool:
    """Whether /readyz turns 200 within a few polls (the pool replaces dead connections)."""
    for _ in range(50):
        if readyz(base_url)[0] == 200:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.postgres
def test_postgres_outage_is_unready_and_recovery_ready_again(
    make_migrated_postgres_url: Callable[[], str], proxy: TcpProxy
) -> None:
    name = urlsplit(make_migrated_postgres_url()).path.lstrip("/")
    # The shared server trusts local connections: the password is only there to be hidden.
    url = proxy.url(name).replace("://postgres@", "://postgres:s3cret@") + "?connect_timeout=2"
    with serve("--store", url) as server:
        assert readyz(server.url)[0] == 200

        proxy.stop()
        status, body = readyz(server.url, server.token)
        assert status == 503
        (backend,) = body["backends"]
        assert backend["scheme"] == "postgresql"
        assert backend["substores"] == ["agents", "runs", "runEvents", "checkpoints"]
        assert backend["url"].startswith("postgresql://postgres:***@127.0.0.1:")
        assert backend["ready"] is False
        assert "unavailable" in backend["reason"] or "unreachable" in backend["reason"]
        assert "s3cret" not in str(body)
        # Liveness is not readiness: the process still answers.
        assert httpx.get(server.url + "healthz").status_code == 200

        proxy.start()
        assert ready_again(server.url)


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_partitioned_backend_is_unready_within_the_backend_timeout(
    request: pytest.FixtureRequest, backend: str
) -> None:
    # Packets dropped, nothing refused: only the backend timeout ends the probe.
    fixture = "make_migrated_postgres_url" if backend == "postgres" else "make_redis_url"
    url = request.getfixturevalue(fixture)()
    target = urlsplit(url)
    proxy = FaultyProxy(target.hostname or "127.0.0.1", target.port or 0)
    netloc = target.netloc.replace(f"{target.hostname}:{target.port}", f"127.0.0.1:{proxy.port}")
    proxied = urlunsplit(target._replace(netloc=netloc))
    try:
        with serve("--store", proxied, "--backend-timeout", "1") as server:
            assert readyz(server.url)[0] == 200
            proxy.blackhole()
            started = time.monotonic()
            status, body = readyz(server.url, server.token)
            waited = time.monotonic() - started
            assert status == 503
            assert body["backends"][0]["ready"] is False
            assert waited < 3.0, waited
            proxy.heal()
            assert ready_again(server.url)
    finally:
        proxy.close()
