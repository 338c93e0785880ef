"""SQLite paths at start-up: a path under a file, and a database that does not exist.

``--store sqlite:////etc/hostname/x.db`` was a 44-line traceback; it is one line
naming the file in the way. A command that only reads (or serves ``--no-migrate``)
pointed at a SQLite file that does not exist created it and its directory, then
advised ``db upgrade``; it now says "no database at PATH" and creates nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    return subprocess.run(
        [sys.executable, "-m", "bridge_store", *args],
        capture_output=True,
        text=True,
        env={**environ, "BRIDGE_STORE_AUTH_TOKEN": "sqlite-paths-token-0123456789"},
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--port", "0"],
        ["serve", "--port", "0", "--no-migrate"],
        ["db", "upgrade"],
        ["agents"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_sqlite_path_under_a_file_is_one_line_naming_it(
    tmp_path: Path, command: list[str]
) -> None:
    blocker = tmp_path / "hostname"
    blocker.write_text("not a directory\n")
    (tmp_path / "archive.tar").write_bytes(b"")
    url = f"sqlite:///{blocker}/x.db"
    result = run_cli(*command, "--store", url, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert str(blocker) in line
    assert "Traceback" not in result.stderr
    assert blocker.read_text() == "not a directory\n"


READ_COMMANDS = {
    "agents": ["agents", "--store", "{url}"],
    "runs": ["runs", "agent-1", "--store", "{url}"],
    "transcript": ["transcript", "run-1", "--store", "{url}"],
    "ui": ["ui", "--port", "0", "--store", "{url}"],
    "copy --from": ["copy", "--from", "{url}", "--to", "memory://"],
    "export": ["export", "--store", "{url}", "--output", "out.tar"],
    "db current": ["db", "current", "--store", "{url}"],
    "serve --no-migrate": ["serve", "--port", "0", "--no-migrate", "--store", "{url}"],
    "keys rotate": ["keys", "rotate", "--store", "{url}", "--encryption-key-file", "key"],
}


@pytest.mark.parametrize("name", list(READ_COMMANDS))
def test_a_read_command_on_a_missing_sqlite_file_says_so_and_creates_nothing(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "key").write_text("00" * 32 + "\n")
    (tmp_path / "key").chmod(0o600)
    before = sorted(tmp_path.iterdir())
    database = tmp_path / "missing-dir" / "agents.db"
    url = f"sqlite:///{database}"
    args = [part.replace("{url}", url) for part in READ_COMMANDS[name]]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"bridge-store: no database at {database} (nothing was created): check the path, "
        f"or create one with `bridge-store db upgrade --store {url}`"
    ]
    assert sorted(tmp_path.iterdir()) == before  # no directory, no file, no archive


def test_db_upgrade_still_creates_the_file_and_its_directory(tmp_path: Path) -> None:
    database = tmp_path / "new-dir" / "agents.db"
    result = run_cli("db", "upgrade", "--store", f"sqlite:///{database}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert database.is_file()
    assert oct(database.stat().st_mode & 0o777) == "0o600"
    shown = run_cli("agents", "--store", f"sqlite:///{database}", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr


def test_a_sqlite_path_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    url = f"sqlite:///{directory}"
    served = run_cli("serve", "--port", "0", "--store", url, cwd=tmp_path)
    assert served.returncode == 2
    assert served.stderr.strip().splitlines() == [
        f"bridge-store: the SQLite database {directory} is not a file; choose another path "
        "(sqlite:///PATH)"
    ]
    read = run_cli("agents", "--store", url, cwd=tmp_path)
    assert read.returncode == 2
    assert (
        read.stderr.strip().splitlines()[0].startswith(f"bridge-store: no database at {directory}")
    )
    assert list(directory.iterdir()) == []
