"""Where the S3 backend finds credentials: URL parameters, the AWS_* environment, or a
profile of ~/.aws/config and credentials (AWS_PROFILE or ``profile=``)."""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import urlencode

import pytest

from bridge_store.errors import ConfigurationError
from bridge_store_s3._bucket import _store_options
from bridge_store_s3._credentials import ProfileCredentials
from bridge_store_s3.backend import S3Backend
from bridge_store_s3.settings import parse_url
from testkit.services import S3_BUCKET, S3_REGION, S3Server

pytestmark = pytest.mark.s3

#: Cleared for each test: the machine's own AWS settings must not leak in.
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ~/.aws with one profile; no credentials in the environment."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "credentials").write_text(
        "[bench-profile]\naws_access_key_id = AKIAFROMFILE\naws_secret_access_key = file-secret\n"
    )
    (tmp_path / "config").write_text("[profile bench-profile]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    return tmp_path


def url_without_keys(server: S3Server, **params: str) -> str:
    query = {"endpoint_url": server.endpoint_url, "region": S3_REGION, **params}
    return f"s3://{S3_BUCKET}/creds-{secrets.token_hex(6)}/?{urlencode(query)}"


def test_a_profile_is_read_from_the_aws_files(aws_files: Path) -> None:
    provider = ProfileCredentials("bench-profile")
    credentials = provider()
    assert (credentials["access_key_id"], credentials["secret_access_key"]) == (
        "AKIAFROMFILE",
        "file-secret",
    )
    assert credentials["expires_at"] is None  # static keys never expire
    assert provider.region == "eu-west-3"


def test_an_unknown_profile_is_a_configuration_error(aws_files: Path) -> None:
    with pytest.raises(ConfigurationError, match="'nobody'"):
        ProfileCredentials("nobody")


def test_url_keys_win_then_profile_param_then_aws_profile(
    aws_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = _store_options(parse_url("s3://b/p?access_key_id=AK&secret_access_key=SK"))
    assert keys["config"]["access_key_id"] == "AK"
    assert "credential_provider" not in keys

    by_param = _store_options(parse_url("s3://b/p?profile=bench-profile"))
    assert isinstance(by_param["credential_provider"], ProfileCredentials)
    assert by_param["config"]["region"] == "eu-west-3"  # the profile's region

    monkeypatch.setenv("AWS_PROFILE", "bench-profile")
    by_env = _store_options(parse_url("s3://b/p?region=us-west-2"))
    assert isinstance(by_env["credential_provider"], ProfileCredentials)
    assert by_env["config"]["region"] == "us-west-2"  # the URL's region wins

    # Keys in the environment beat AWS_PROFILE (object_store reads them itself).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    assert "credential_provider" not in _store_options(parse_url("s3://b/p"))
    by_param_again = _store_options(parse_url("s3://b/p?profile=bench-profile"))
    assert isinstance(by_param_again["credential_provider"], ProfileCredentials)


async def test_a_store_runs_on_profile_credentials(aws_files: Path, s3_server: S3Server) -> None:
    calls: list[str] = []
    real_call = ProfileCredentials.__call__

    def counted(self: ProfileCredentials) -> object:
        calls.append("asked")
        return real_call(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ProfileCredentials, "__call__", counted)
        url = url_without_keys(s3_server, profile="bench-profile")
        store = S3Backend(parse_url(url))
        await store.start(migrate=True)
        try:
            await store.checkpoints.create("default", "a", "b", b"bytes")
            assert await store.checkpoints.get("default", "a", "b") == b"bytes"
        finally:
            await store.close()
            s3_server.delete_prefix(parse_url(url).prefix)
    assert calls


async def test_a_store_runs_on_environment_credentials(
    aws_files: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    url = url_without_keys(s3_server)
    assert "credential_provider" not in _store_options(parse_url(url))
    store = S3Backend(parse_url(url))
    await store.start(migrate=True)
    try:
        assert await store.agents.get("default", "nobody") is None
    finally:
        await store.close()
        s3_server.delete_prefix(parse_url(url).prefix)
