"""S3 configured the way MinIO, LocalStack and R2 users do it: the standard AWS variables."""

from __future__ import annotations

import secrets

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.substores import BackendOptions
from bridge_store.backend.tenants import DEFAULT_TENANT
from bridge_store.conformance.harness import agent
from bridge_store.errors import ConfigurationError
from bridge_store.stack.stores import Routes, open_stores
from testkit.services import S3_BUCKET, S3_REGION, S3Server

pytestmark = pytest.mark.s3

#: Every variable through which credentials could reach object_store.
CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


@pytest.fixture
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*CREDENTIAL_VARIABLES, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
async def test_an_http_endpoint_from_the_environment_is_used(
    variable: str, bare_environment: pytest.MonkeyPatch, s3_server: S3Server
) -> None:
    # Over plain HTTP: the endpoint says so, no AWS_ALLOW_HTTP needed.
    assert s3_server.endpoint_url.startswith("http://")
    bare_environment.setenv(variable, s3_server.endpoint_url)
    bare_environment.setenv("AWS_ACCESS_KEY_ID", "environment-key")
    bare_environment.setenv("AWS_SECRET_ACCESS_KEY", "environment-secret")
    prefix = f"test-{secrets.token_hex(6)}"
    s3_server.handed_out.append((S3_BUCKET, prefix + "/"))
    url = f"s3://{S3_BUCKET}/{prefix}?region={S3_REGION}"
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        doc = agent("from-the-environment")
        await opened.stores.agents.create(DEFAULT_TENANT, doc)
        assert await opened.stores.agents.get(DEFAULT_TENANT, "from-the-environment") == doc
    finally:
        await opened.close()
        s3_server.delete_prefix(prefix + "/")


async def test_no_credentials_anywhere_is_said_so(
    bare_environment: pytest.MonkeyPatch, s3_server: S3Server
) -> None:
    # object_store's last resort is the EC2 instance metadata service; its failure used
    # to be the whole message ("Error performing PUT http://169.254.169.254/...").
    bare_environment.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    url = f"s3://{S3_BUCKET}/no-credentials?region={S3_REGION}"
    with pytest.raises(ConfigurationError) as caught:
        await open_stores(
            get_plugin_manager(),
            Routes.single(url),
            migrate=True,
            options=BackendOptions(timeout=1.0),
        )
    message = str(caught.value)
    assert message.startswith(f"no AWS credentials found for s3://{S3_BUCKET}/no-credentials/")
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE" in message
