"""Start-up problems: one or two lines naming the cause and the fix, a documented status.

Each common mistake a new user makes is run as they would run it (through ``serve``, and
through ``db`` where it concerns the store), and must end with
``bridge-store: <cause>: <fix>`` on stderr, no traceback, and exit status 2 (a mistake
to fix) or 3 (a backend that did not answer, which may come back): ``serve``, ``db``,
``bridge`` and :func:`bridge_store.client.launch`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bridge_store.client import launch
from bridge_store.errors import (
    EXIT_CONFIGURATION,
    EXIT_UNREACHABLE,
    BackendUnreachable,
    ConfigurationError,
)
from testkit.pg_cluster import postgres_cluster
from testkit.services import (
    S3_BUCKET,
    S3_REGION,
    S3Server,
    database_url,
    execute,
    free_port,
    s3_store_url,
)
from tests.test_s3_environment import CREDENTIAL_VARIABLES

TOKEN = "a-token-long-enough-for-serve"
RUN_TIMEOUT_SECONDS = 120


def run(
    *args: str, cwd: Path, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``bridge-store *args`` as a new user runs it: no store configured in the environment.

    ``env`` adds variables, or removes those it maps to None."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    merged = {**base, "BRIDGE_STORE_AUTH_TOKEN": TOKEN, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={name: value for name, value in merged.items() if value is not None},
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )


def said(result: subprocess.CompletedProcess[str], status: int, *fragments: str) -> str:
    """The one message ``result`` printed, checked: the status, no traceback, the words."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert 1 <= len(lines) <= 2, result.stderr
    assert lines[0].startswith("bridge-store: "), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    return result.stderr


@contextmanager
def read_only_directory(path: Path) -> Iterator[Path]:
    """A directory no file can be created in, even by root (made immutable then)."""
    path.mkdir()
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: no directory is read-only")
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(0o555)
    try:
        yield path
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o755)


def down_url(scheme: str) -> str:
    """A URL on a loopback port nothing listens on."""
    port = free_port()
    return {
        "postgresql": f"postgresql://postgres@127.0.0.1:{port}/store",
        "redis": f"redis://127.0.0.1:{port}/0",
    }[scheme]


@pytest.mark.postgres
def test_postgres_refusing_the_password(tmp_path: Path) -> None:
    with postgres_cluster() as cluster:
        admin = cluster.primary.url()
        execute(admin, "ALTER USER postgres PASSWORD 'the-right-password'")
        hba = cluster.primary.directory / "pg_hba.conf"
        hba.write_text("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
        execute(admin, "SELECT pg_reload_conf()")
        url = f"postgresql://postgres:a-wrong-password@127.0.0.1:{cluster.primary.port}/postgres"
        for command in (("serve", "--port", "0"), ("db", "upgrade")):
            message = said(
                run(*command, "--store", url, cwd=tmp_path),
                EXIT_CONFIGURATION,
                "refused the login",
                "check the user and password in the store URL",
            )
            assert "a-wrong-password" not in message


@pytest.mark.postgres
@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("db", "upgrade")])
def test_postgres_database_missing(tmp_path: Path, command: tuple[str, ...]) -> None:
    url = database_url("no_such_database_here")
    said(
        run(*command, "--store", url, cwd=tmp_path),
        EXIT_CONFIGURATION,
        'database "no_such_database_here" does not exist',
        "create it",
    )


@pytest.mark.parametrize(
    "command", [("serve", "--port", "0"), ("db", "upgrade"), ("db", "current")]
)
@pytest.mark.parametrize("scheme", ["postgresql", "redis"])
def test_a_backend_that_is_down(tmp_path: Path, scheme: str, command: tuple[str, ...]) -> None:
    said(
        run(*command, "--store", down_url(scheme), cwd=tmp_path),
        EXIT_UNREACHABLE,
        "cannot reach",
        "running",
    )


@pytest.mark.postgres
@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("db", "upgrade")])
def test_postgres_search_path_naming_no_schema(
    tmp_path: Path, make_postgres_url: Callable[[], str], command: tuple[str, ...]
) -> None:
    url = make_postgres_url() + "?search_path=no_such_schema"
    said(
        run(*command, "--store", url, cwd=tmp_path),
        EXIT_CONFIGURATION,
        "search_path=no_such_schema",
        "CREATE SCHEMA",
    )


def test_the_port_taken(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        said(
            run("serve", "--port", str(port), "--store", "memory://", cwd=tmp_path),
            EXIT_CONFIGURATION,
            f"cannot listen on 127.0.0.1:{port}",
            "choose another --port",
        )


def test_a_host_that_is_not_this_machine(tmp_path: Path) -> None:
    said(
        run("serve", "--host", "192.0.2.1", "--port", "0", "--store", "memory://", cwd=tmp_path),
        EXIT_CONFIGURATION,
        "cannot listen on 192.0.2.1:0",
        "check --host",
    )


@pytest.mark.s3
def test_s3_without_credentials(tmp_path: Path, s3_server: S3Server) -> None:
    nowhere = str(tmp_path / "no-aws-files")
    result = run(
        "serve", "--port", "0", "--backend-timeout", "1", "--store", f"s3://{S3_BUCKET}/p?region={S3_REGION}",
        cwd=tmp_path,
        env={
            "AWS_ENDPOINT_URL": s3_server.endpoint_url,
            "AWS_CONFIG_FILE": nowhere,
            "AWS_SHARED_CREDENTIALS_FILE": nowhere,
            **dict.fromkeys(CREDENTIAL_VARIABLES),
        },
    )  # fmt: skip
    said(result, EXIT_CONFIGURATION, "no AWS credentials found", "AWS_ACCESS_KEY_ID")


@pytest.mark.redis
@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("db", "current")])
def test_redis_database_number_out_of_range(tmp_path: Path, command: tuple[str, ...]) -> None:
    said(
        run(*command, "--store", "redis://127.0.0.1:6379/99", cwd=tmp_path),
        EXIT_CONFIGURATION,
        "has no database 99",
        "use a number below",
    )


@pytest.mark.s3
@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("db", "current")])
def test_s3_bucket_missing(tmp_path: Path, s3_server: S3Server, command: tuple[str, ...]) -> None:
    url = s3_store_url(s3_server.endpoint_url, "p/", bucket="no-such-bucket")
    said(
        run(*command, "--store", url, cwd=tmp_path),
        EXIT_CONFIGURATION,
        "bucket 'no-such-bucket' does not exist",
        "create it first",
    )


@pytest.mark.parametrize("command", [("serve", "--port", "0"), ("db", "upgrade")])
def test_sqlite_file_in_a_read_only_directory(tmp_path: Path, command: tuple[str, ...]) -> None:
    with read_only_directory(tmp_path / "locked") as locked:
        said(
            run(*command, "--store", f"sqlite:///{locked}/agents.db", cwd=tmp_path),
            EXIT_CONFIGURATION,
            f"cannot create the SQLite database {locked}/agents.db",
            "choose a place this user may write",
        )


def test_token_file_in_a_read_only_directory(tmp_path: Path) -> None:
    with read_only_directory(tmp_path / "locked") as locked:
        token_file = locked / "store.token"
        result = run(
            "serve", "--port", "0", "--store", "memory://", "--auth-token-file", str(token_file),
            cwd=tmp_path,
            env={"BRIDGE_STORE_AUTH_TOKEN": ""},
        )  # fmt: skip
        said(result, EXIT_CONFIGURATION, f"cannot create the auth token file {token_file}")


def test_a_token_too_short(tmp_path: Path) -> None:
    result = run(
        "serve", "--port", "0", "--store", "memory://", cwd=tmp_path,
        env={"BRIDGE_STORE_AUTH_TOKEN": "secret"},
    )  # fmt: skip
    said(result, EXIT_CONFIGURATION, "6 characters long; use at least 16")


@pytest.mark.postgres
def test_db_upgrade_does_not_warn_about_the_schema_it_upgrades(
    tmp_path: Path, make_postgres_url: Callable[[], str]
) -> None:
    result = run("db", "upgrade", "--store", make_postgres_url(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "upgraded to" in result.stdout
    assert "calls will fail" not in result.stderr


def test_bridge_with_its_store_down_says_so_once(tmp_path: Path) -> None:
    result = run(
        "bridge", "--store", down_url("postgresql"), "--workspace", str(tmp_path), cwd=tmp_path
    )
    message = said(result, EXIT_UNREACHABLE, "cannot reach", "exited with status 3")
    # The store's own line passes through once; the bridge's adds the summary.
    assert message.count("cannot reach") == 1


def test_bridge_with_a_store_it_cannot_create_says_so_once(tmp_path: Path) -> None:
    with read_only_directory(tmp_path / "locked") as locked:
        url = f"sqlite:///{locked}/agents.db"
        result = run("bridge", "--store", url, "--workspace", str(tmp_path), cwd=tmp_path)
    message = said(result, EXIT_CONFIGURATION, "cannot create the SQLite database", "status 2")
    assert message.count("cannot create") == 1


def test_launch_with_a_store_it_cannot_create_raises_two_lines(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    with read_only_directory(locked), pytest.raises(ConfigurationError) as caught:
        launch(f"sqlite:///{locked}/agents.db", workspace=tmp_path)
    assert not isinstance(caught.value, BackendUnreachable)
    message = str(caught.value)
    assert len(message.splitlines()) <= 2, message
    assert "cannot create the SQLite database" in message


def test_launch_with_its_store_down_raises_two_lines(tmp_path: Path) -> None:
    with pytest.raises(BackendUnreachable) as caught:
        launch(down_url("postgresql"), workspace=tmp_path)
    message = str(caught.value)
    assert "Traceback" not in message
    assert len(message.splitlines()) <= 2, message
    assert "cannot reach" in message
