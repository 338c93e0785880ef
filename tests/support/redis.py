"""Redis fixtures: fresh key prefixes on the machine's Redis, and private servers.

``make_redis_url()`` is what most tests want: each call returns a store URL on the
machine's Redis (``testkit.services.REDIS_URL``, from ``BRIDGE_STORE_TEST_REDIS_URL``)
under a new unique key prefix; every key of every prefix handed out is deleted at
teardown. Keyword arguments become URL parameters (``make_redis_url(run_events_ttl="60")``).
redis-py is imported only when used, so an install without the redis extra can still
collect the tests.

``redis_server`` starts a private ``redis-server`` on a free loopback port for tests
that must stop Redis or see every key in it; the machine's Redis is shared with other
tests and is never stopped.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.conformance.harness import StoreClient
from bridge_store.stack.stores import Routes, open_stores
from testkit.services import REDIS_URL, delete_prefix, free_port, new_redis_prefix, redis_store_url

if TYPE_CHECKING:
    import redis

START_TIMEOUT_SECONDS = 20.0

MakeRedisUrl = Callable[..., str]


@asynccontextmanager
async def store_client(url: str) -> AsyncIterator[StoreClient]:
    """The stores behind ``url``, opened in this process, driven as the server does."""
    manager = get_plugin_manager()
    opened = await open_stores(manager, Routes.single(url), migrate=True)
    try:
        yield StoreClient(stores=opened.stores, manager=manager)
    finally:
        await opened.close()


@pytest.fixture
def make_redis_url() -> Iterator[MakeRedisUrl]:
    """A factory of store URLs on the machine's Redis, each under a new key prefix."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as error:
        client.close()
        pytest.fail(f"the machine's Redis at {REDIS_URL} is not reachable: {error}")
    prefixes: list[str] = []

    def make(**params: str) -> str:
        prefix = new_redis_prefix()
        prefixes.append(prefix)
        return redis_store_url(prefix, **params)

    try:
        yield make
    finally:
        for prefix in prefixes:
            delete_prefix(client, prefix)
        client.close()


@dataclass
class RedisServer:
    """A private ``redis-server`` process that a test may stop and start again.

    With ``cluster``, the server runs in cluster mode (its bus on another free port)
    and owns no slots until given some. With ``tls``, it speaks only TLS, with a
    self-signed certificate for 127.0.0.1 (``certificate``, also the CA to trust).
    """

    port: int
    directory: Path
    cluster: bool = False
    tls: bool = False
    process: subprocess.Popen[bytes] | None = None
    bus_port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        if self.tls:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.certificate}"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def certificate(self) -> Path:
        return self.directory / "cert.pem"

    def client(self) -> redis.Redis:
        import redis

        if self.tls:
            return redis.Redis(
                host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=str(self.certificate)
            )
        return redis.Redis(host="127.0.0.1", port=self.port)

    def start(self) -> None:
        """Start (again) on the same port, with nothing persisted."""
        executable = shutil.which("redis-server")
        if executable is None:
            pytest.fail("redis-server is not installed")
        options = [
            *(self._tls_options() if self.tls else ["--port", str(self.port)]),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
        ]  # fmt: skip
        if self.cluster:
            options += [
                "--cluster-enabled", "yes",
                "--cluster-port", str(self.bus_port),
                "--cluster-config-file", f"nodes-{self.port}.conf",
            ]  # fmt: skip
        import redis

        self.process = subprocess.Popen(
            [executable, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with self.client() as client:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(
                            f"redis-server did not start on port {self.port}"
                        ) from None
                    time.sleep(0.05)

    def _tls_options(self) -> list[str]:
        key = self.directory / "key.pem"
        if not self.certificate.exists():
            subprocess.run(
                [
                    "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(self.certificate),
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                ],
                check=True,
                capture_output=True,
            )  # fmt: skip
        return [
            "--port", "0",
            "--tls-port", str(self.port),
            "--tls-cert-file", str(self.certificate),
            "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(self.certificate),
            "--tls-auth-clients", "no",
        ]  # fmt: skip

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=START_TIMEOUT_SECONDS)
        self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private, empty redis-server on a free port, stopped at teardown."""
    server = RedisServer(port=free_port(), directory=tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_cluster(directory: Path, slots_of_first: list[int]) -> tuple[RedisServer, RedisServer]:
    """A two-node Redis Cluster: the first node owns ``slots_of_first``, the second the rest.

    A client of the first node alone can use keys of those slots; any other key is on
    the second node, so touching it fails (MOVED, or a script's "non local key").
    """
    first, second = (
        RedisServer(port=free_port(), directory=directory / name, cluster=True)
        for name in ("first", "second")
    )
    try:
        for node in (first, second):
            node.directory.mkdir()
            node.start()
        mine = set(slots_of_first)
        with first.client() as one, second.client() as two:
            one.cluster("ADDSLOTS", *sorted(mine))
            two.cluster("ADDSLOTS", *sorted(set(range(16384)) - mine))
            one.cluster("MEET", "127.0.0.1", str(second.port), str(second.bus_port))
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while not all(c.cluster("INFO")["cluster_state"] == "ok" for c in (one, two)):
                if time.monotonic() > deadline:
                    raise AssertionError("the two-node cluster did not come up")
                time.sleep(0.05)
    except BaseException:
        first.stop()
        second.stop()
        raise
    return first, second
