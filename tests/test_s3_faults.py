"""S3 unreachable or throttling: ``unavailable`` after bounded retries, never a hang or a
driver trace, and service again once S3 is back."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.errors import Code, ConfigurationError, ConnectError
from bridge_store_s3.backend import S3Backend
from bridge_store_s3.settings import parse_url
from testkit.services import S3Server
from tests.support.server import serve

pytestmark = pytest.mark.s3

SECRET = "sekrit-value-never-printed"


def private_url(server: S3Server, **params: str) -> str:
    # moto keeps one state per process: a fresh prefix keeps this test's keys its own.
    return server.url(f"faults-{secrets.token_hex(6)}/", secret_access_key=SECRET, **params)


@pytest.fixture
async def store(private_s3_server: S3Server) -> AsyncIterator[S3Backend]:
    backend = S3Backend(parse_url(private_url(private_s3_server, max_attempts="3")))
    await backend.start(migrate=True)
    yield backend
    await backend.close()


def assert_unavailable(error: ConnectError) -> None:
    assert error.code == Code.UNAVAILABLE, error
    assert SECRET not in error.message


async def test_throttling_is_unavailable_after_max_attempts(
    store: S3Backend, private_s3_server: S3Server
) -> None:
    await store.agents.create("default", {"agentId": "a", "cwd": "/", "updatedAt": 1})
    private_s3_server.throttled = True
    before = private_s3_server.requests
    with pytest.raises(ConnectError) as caught:
        await store.agents.get("default", "a")
    assert_unavailable(caught.value)
    assert "SlowDown" in caught.value.message
    # One try and two retries (max_attempts=3), then no more.
    assert private_s3_server.requests - before == 3

    private_s3_server.throttled = False
    assert await store.agents.get("default", "a") == {"agentId": "a", "cwd": "/", "updatedAt": 1}


async def test_every_substore_maps_an_outage_to_unavailable(
    store: S3Backend, private_s3_server: S3Server
) -> None:
    private_s3_server.stop()
    calls = [
        store.agents.get("default", "a"),
        store.agents.create("default", {"agentId": "a", "cwd": "/", "updatedAt": 1}),
        store.agents.list("default", cwd=None, after=None, limit=5),
        store.runs.list("default", agent_ids=["a"], run_ids=None, after=None, limit=5),
        store.run_events.append(
            "default", {"runId": "r", "eventType": "t", "idempotencyKey": None}
        ),
        store.run_events.list("default", "r", after_seq=0, limit=5),
        store.checkpoints.create("default", "a", "b", b"x" * 1024),
        store.checkpoints.delete("default", agent_ids=None, blob_ids=None),
    ]
    for call in calls:
        with pytest.raises(ConnectError) as caught:
            await call
        assert_unavailable(caught.value)


async def test_start_fails_clearly_when_s3_is_unreachable(private_s3_server: S3Server) -> None:
    url = private_url(private_s3_server, max_attempts="1")
    private_s3_server.stop()
    backend = open_backend(get_plugin_manager(), url)
    with pytest.raises(ConfigurationError) as caught:
        await backend.start(migrate=True)
    assert private_s3_server.endpoint_url in str(caught.value)
    assert SECRET not in str(caught.value)


async def test_start_fails_clearly_when_the_bucket_is_missing(s3_server: S3Server) -> None:
    backend = open_backend(get_plugin_manager(), s3_server.url("p/", bucket="no-such-bucket"))
    with pytest.raises(ConfigurationError, match="bucket 'no-such-bucket' does not exist"):
        await backend.start(migrate=True)


@pytest.mark.slow
def test_the_server_answers_unavailable_while_s3_is_down(private_s3_server: S3Server) -> None:
    url = private_url(private_s3_server, max_attempts="2")
    with serve("--store", url) as server:
        server.call("agents", "create", {"agent": {"agentId": "a", "cwd": "/", "updatedAt": 1}})
        private_s3_server.throttled = True
        with pytest.raises(ConnectError) as caught:
            server.call("agents", "get", {"agentId": "a"})
        assert_unavailable(caught.value)
        private_s3_server.throttled = False
        assert server.call("agents", "get", {"agentId": "a"})["agentId"] == "a"
    assert SECRET not in "".join(server.stderr_lines)
