"""``bridge-store db current`` and ``db upgrade`` on every backend and on a routed store.

Each command starts every distinct backend of the configuration without migrating,
reports one line per backend (its URL with the password redacted), and exits 0; SQL
stores get their schema, S3 its layout marker, Redis and memory have none. A store it
cannot start is one line on stderr and exit status 2, nothing on stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridge_store.errors import EXIT_CONFIGURATION, EXIT_UNREACHABLE
from bridge_store.urls import redact
from bridge_store_sql.migrate import head_revision
from testkit.services import free_port

from .support.stores import STORE_KINDS, serve_arguments

#: What ``db current`` shows for each kind of store before and after ``db upgrade``.
SQL = ("(no schema)", head_revision())
S3 = ("(no schema)", "1")
SCHEMALESS = ("(no schema)", "(no schema)")


def db(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", "db", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def revisions_shown(output: str) -> dict[str, str]:
    """``URL: REVISION`` lines as a mapping (``upgraded to`` dropped)."""
    shown: dict[str, str] = {}
    for line in output.splitlines():
        if line.startswith("workspaces: "):  # what upgrade recorded of agents' workspaces
            continue
        url, _, revision = line.rpartition(": ")
        shown[url] = revision.removeprefix("upgraded to ")
    return shown


def expected_revisions(url: str) -> tuple[str, str]:
    if url.startswith(("sqlite", "postgresql")):
        return SQL
    if url.startswith("s3://"):
        return S3
    return SCHEMALESS


def routed_arguments(request: pytest.FixtureRequest) -> list[str]:
    """The compose file's migrate job: rows on Postgres, events on Redis, blobs on S3."""
    return [
        "--store",
        request.getfixturevalue("make_postgres_url")(),
        "--run-events",
        request.getfixturevalue("make_redis_url")(),
        "--checkpoints",
        request.getfixturevalue("make_s3_url")(),
    ]


ROUTED = pytest.param("routed", marks=[pytest.mark.postgres, pytest.mark.redis, pytest.mark.s3])


@pytest.mark.parametrize("kind", [*STORE_KINDS, ROUTED])
def test_current_then_upgrade_then_current(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    args = (
        routed_arguments(request) if kind == "routed" else serve_arguments(kind, request, tmp_path)
    )
    urls = list(dict.fromkeys(args[1::2]))  # each distinct backend once, in flag order

    before = db("current", *args)
    assert before.returncode == 0, before.stderr
    assert revisions_shown(before.stdout) == {
        redact(url): expected_revisions(url)[0] for url in urls
    }

    upgraded = db("upgrade", *args)
    assert upgraded.returncode == 0, upgraded.stderr
    # An empty store has no agents' workspaces to record: one line per backend.
    assert all(": upgraded to " in line for line in upgraded.stdout.splitlines())
    after = {redact(url): expected_revisions(url)[1] for url in urls}
    assert revisions_shown(upgraded.stdout) == after

    again = db("current", *args)
    assert again.returncode == 0, again.stderr
    assert revisions_shown(again.stdout) == after


@pytest.mark.parametrize("command", ["current", "upgrade"])
@pytest.mark.parametrize(
    ("url", "message", "status"),
    [
        pytest.param(
            f"postgresql://postgres:secret-password@127.0.0.1:{free_port()}/x?connect_timeout=5",
            "cannot reach postgresql://postgres:***@",
            EXIT_UNREACHABLE,
            id="postgres down",
        ),
        pytest.param(
            f"s3://bucket/p?endpoint_url=http://127.0.0.1:{free_port()}&region=us-east-1"
            "&access_key_id=a&secret_access_key=secret-password&max_attempts=1",
            "cannot list bucket 'bucket'",
            EXIT_UNREACHABLE,
            id="s3 down",
        ),
        pytest.param(
            "nope://x",
            "no installed backend serves nope://",
            EXIT_CONFIGURATION,
            id="unknown scheme",
        ),
    ],
)
def test_a_store_that_cannot_start_is_one_line(
    command: str, url: str, message: str, status: int
) -> None:
    # A backend that did not answer is exit status 3 (it may later), a mistake 2.
    result = db(command, "--store", url)
    assert result.returncode == status
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("bridge-store: ")
    assert message in line
    assert "secret-password" not in line


def test_a_routed_store_stops_at_the_first_backend_that_cannot_start(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'store.db'}"
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/x?connect_timeout=5"
    result = db("upgrade", "--store", sqlite, "--checkpoints", down)
    assert result.returncode == EXIT_UNREACHABLE
    # The SQLite store came first and was upgraded; the report says which failed.
    assert revisions_shown(result.stdout) == {sqlite: head_revision()}
    assert redact(down).split("?")[0] in result.stderr
