"""S3 store URLs: what they configure, what they reject, secrets, and the install hint."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store.errors import ConfigurationError
from bridge_store_s3.settings import S3Settings, parse_url


def test_bucket_and_prefix_with_defaults() -> None:
    settings = parse_url("s3://agents-bucket/team-a/prod/", environ={})
    assert (settings.bucket, settings.prefix) == ("agents-bucket", "team-a/prod/")
    # Unset: the standard AWS chain (environment, ~/.aws, instance role) decides.
    assert settings.endpoint_url is None
    assert settings.region is None
    assert settings.access_key_id is None
    assert settings.addressing_style == "auto"
    assert parse_url("s3://agents-bucket").prefix == ""
    assert parse_url("s3://agents-bucket/one").prefix == "one/"


def test_every_parameter() -> None:
    settings = parse_url(
        "s3://b-1/p?endpoint_url=http%3A%2F%2F127.0.0.1%3A9000&region=eu-west-3&profile=ops"
        "&access_key_id=AK&secret_access_key=S%2FK&session_token=T&addressing_style=path"
        "&max_attempts=2&max_connections=8&connect_timeout=0.5&request_timeout=3"
    )
    assert settings == S3Settings(
        bucket="b-1",
        prefix="p/",
        endpoint_url="http://127.0.0.1:9000",
        region="eu-west-3",
        profile="ops",
        access_key_id="AK",
        secret_access_key="S/K",
        session_token="T",
        addressing_style="path",
        max_attempts=2,
        max_connections=8,
        connect_timeout=0.5,
        request_timeout=3.0,
    )


def test_secrets_stay_out_of_repr_and_messages() -> None:
    settings = parse_url(
        "s3://b-1/p?endpoint_url=http%3A%2F%2Fminio%3A9000"
        "&access_key_id=AKIDSECRET&secret_access_key=hunter2&session_token=tok3n"
    )
    for text in (repr(settings), settings.describe()):
        for secret in ("AKIDSECRET", "hunter2", "tok3n"):
            assert secret not in text
    assert settings.describe() == "s3://b-1/p/ at http://minio:9000"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("s3:///prefix", "s3://bucket/prefix"),
        ("s3://key:secret@bucket/p", "not the host"),
        ("s3://bucket:9000/p", "s3://bucket/prefix"),
        ("s3://bucket/p?endpoint=http://x", "unknown s3 URL parameter 'endpoint'"),
        ("s3://bucket/p?region=a&region=b", "given twice"),
        ("s3://bucket/p?addressing_style=dns", "addressing_style"),
        ("s3://bucket/p?access_key_id=AK", "go together"),
        ("s3://bucket/p?max_attempts=0", "max_attempts"),
        ("s3://bucket/p?max_connections=many", "max_connections"),
        ("s3://bucket/p?connect_timeout=-1", "connect_timeout"),
    ],
)
def test_bad_urls_are_configuration_errors(url: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem.replace("?", r"\?")):
        parse_url(url)


def test_the_plugin_claims_s3_urls_without_connecting() -> None:
    manager = get_plugin_manager()
    # Nothing listens on port 1: opening must still succeed, since it does not connect.
    backend = open_backend(manager, "s3://bucket/p?endpoint_url=http%3A%2F%2F127.0.0.1%3A1")
    assert backend.agents is not None
    assert backend.runs is not None
    assert backend.run_events is not None
    assert backend.checkpoints is not None
    assert "s3" in {s for answer in manager.hook.bridge_store_url_schemes() for s in answer}


def test_without_obstore_the_error_names_the_extra() -> None:
    # A child interpreter in which `import obstore` fails, as without the extra.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["obstore"] = None
        from bridge_store.errors import ConfigurationError
        from bridge_store.backend.plugins import get_plugin_manager, open_backend
        try:
            open_backend(get_plugin_manager(), "s3://bucket/prefix")
        except ConfigurationError as error:
            print(error)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "pip install 'bridge-store[s3]'" in result.stdout
    assert "Traceback" not in result.stderr


def test_the_core_and_the_plugin_module_do_not_import_obstore_or_botocore() -> None:
    script = (
        "import sys, bridge_store.backend.plugins, bridge_store_s3; "
        "print(any(m.split('.')[0] in ('obstore', 'botocore') for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_the_endpoint_comes_from_the_standard_aws_variables_when_the_url_has_none() -> None:
    url = "s3://b/p"
    general = {"AWS_ENDPOINT_URL": "http://minio:9000"}
    both = {**general, "AWS_ENDPOINT_URL_S3": "http://s3-only:9000"}
    assert parse_url(url, environ={}).endpoint_url is None
    assert parse_url(url, environ=general).endpoint_url == "http://minio:9000"
    # The S3-specific variable wins, as in the AWS SDKs; the URL wins over both.
    assert parse_url(url, environ=both).endpoint_url == "http://s3-only:9000"
    given = parse_url(url + "?endpoint_url=https%3A%2F%2Fr2.example", environ=both)
    assert given.endpoint_url == "https://r2.example"


def test_request_timeouts_default_to_the_server_backend_timeout() -> None:
    settings = parse_url("s3://b/p", timeout=2.5)
    assert (settings.connect_timeout, settings.request_timeout) == (2.5, 2.5)
    assert settings.blob_timeout == 60.0  # a 95 MiB blob on a slow link
    url = "s3://b/p?connect_timeout=1&request_timeout=9&blob_timeout=300"
    settings = parse_url(url, timeout=2.5)
    assert (settings.connect_timeout, settings.request_timeout, settings.blob_timeout) == (
        1.0,
        9.0,
        300.0,
    )
