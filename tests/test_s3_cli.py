"""``bridge-store db`` on an S3 store: the layout marker, and no secret in the output."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from testkit.services import S3Server

pytestmark = pytest.mark.s3

SECRET = "cli-secret-never-printed"


@pytest.fixture
def url(s3_server: S3Server) -> Iterator[str]:
    prefix = f"cli-{secrets.token_hex(6)}/"
    yield s3_server.url(prefix, secret_access_key=SECRET, session_token=SECRET)
    s3_server.delete_prefix(prefix)


def db(command: str, url: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "bridge_store", "db", command, "--store", url],
        capture_output=True,
        text=True,
        check=True,
    )
    assert SECRET not in result.stdout + result.stderr
    return result.stdout.strip()


def test_db_current_and_upgrade_report_the_layout_version(url: str) -> None:
    assert db("current", url).endswith(": (no schema)")
    upgraded = db("upgrade", url)
    assert upgraded.endswith(": upgraded to 1")
    assert "secret_access_key=***" in upgraded
    assert db("current", url).endswith(": 1")
