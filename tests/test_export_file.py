"""``bridge-store export`` writes archives only their owner can read, from the moment the
file exists, and says when one holds agents' keys in the clear (issue 21: archives were
0644 and held every agent's key)."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.lifecycle.export import export_history
from bridge_store.security.encryption import new_key_line
from bridge_store.stack.stores import Stores
from tests.support.lifecycle import on_stores, seed
from tests.test_copy import routes, sqlite_arguments


@pytest.fixture
def source(tmp_path: Path) -> list[str]:
    arguments = sqlite_arguments(tmp_path / "source.db")
    on_stores(routes(arguments), lambda stores: seed(stores, agents=2, blob_size=100))
    return arguments


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask, which left every new file readable by all."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_the_archive_is_0600_from_its_creation(source: list[str], tmp_path: Path) -> None:
    output = tmp_path / "backup.tar.gz"
    output.write_bytes(gzip.compress(b"an older backup"))
    output.chmod(0o644)
    seen: list[int] = []

    def partial_mode() -> None:
        (partial,) = tmp_path.glob(f".{output.name}.*.partial")
        seen.append(_mode(partial))

    async def write(stores: Stores) -> None:
        # After each agent, while the archive is being written under its partial name.
        await export_history(stores, output, tenants=None, on_agent=partial_mode)

    on_stores(routes(source), write)
    assert seen
    assert set(seen) == {0o600}
    assert _mode(output) == 0o600
    assert main(["export", *source, "--output", str(output)]) == 0
    assert _mode(output) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_a_link_planted_at_the_partial_name_is_not_followed(
    source: list[str], tmp_path: Path
) -> None:
    output = tmp_path / "backup.tar.gz"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"not to be overwritten")
    output.with_name(output.name + ".partial").symlink_to(elsewhere)
    # Named as an interrupted export's partial file: not followed, not removed.
    planted = output.with_name(f".{output.name}.abcdefgh.partial")
    planted.symlink_to(elsewhere)
    assert main(["export", *source, "--output", str(output)]) == 0
    assert elsewhere.read_bytes() == b"not to be overwritten"
    assert planted.is_symlink()
    assert _mode(output) == 0o600


def test_plaintext_keys_are_said_in_one_line_sealed_ones_are_not(
    source: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.tar.gz"
    assert main(["export", *source, "--output", str(plain)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"bridge-store: {plain} holds the blobEncryptionKey of 4 agents in the clear: it "
        "is readable by you only (0600); keep it as secret as the store's keys"
    ]
    # A sealed store exported without its key file: sealed values, no key in the clear.
    keys = tmp_path / "store.keys"
    keys.write_text(new_key_line() + "\n")
    sealed = sqlite_arguments(tmp_path / "sealed.db")
    copy = ["copy", "--from", source[1], "--to", sealed[1], "--to-encryption-key-file", str(keys)]
    assert main(copy) == 0
    capsys.readouterr()
    assert main(["export", *sealed, "--output", str(tmp_path / "sealed.tar.gz")]) == 0
    assert capsys.readouterr().err == ""
    # Opened with the key file, the archive holds them in the clear again, and says so.
    opened = ["--encryption-key-file", str(keys)]
    assert main(["export", *sealed, *opened, "--output", str(tmp_path / "open.tar.gz")]) == 0
    assert "in the clear" in capsys.readouterr().err


def test_a_refused_export_leaves_no_partial_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = sqlite_arguments(tmp_path / "source.db")

    async def bad(stores: Stores) -> None:
        agent = {"agentId": "a", "cwd": "/w", "updatedAt": "yesterday"}
        await stores.agents.create("default", agent)

    on_stores(routes(arguments), bad)
    output = tmp_path / "backup.tar.gz"
    assert main(["export", *arguments, "--output", str(output)]) == 2
    assert "agent.updatedAt must be an integer" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["source.db"]


def test_an_output_that_is_not_an_archive_is_not_replaced(
    source: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --output naming the store's own SQLite file would have replaced it with the backup.
    database = Path(source[1].removeprefix("sqlite:///"))
    before = database.read_bytes()
    assert main(["export", *source, "--output", str(database)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bridge-store: --output {database} exists and is not an archive: export replaces "
        "only an earlier archive; choose another name, or remove it first"
    ]
    assert database.read_bytes() == before
    # An earlier archive is replaced, as a backup run again expects.
    archive = tmp_path / "backup.tar.gz"
    assert main(["export", *source, "--output", str(archive)]) == 0
    assert main(["export", *source, "--output", str(archive)]) == 0


def test_two_exports_to_one_output_at_once_leave_a_whole_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both wrote ``OUTPUT.partial``: the second unlinked the first's, and the first then
    renamed the second's half-written file into place and exited 0."""
    arguments = sqlite_arguments(tmp_path / "source.db")
    on_stores(routes(arguments), lambda stores: seed(stores, agents=10, blob_size=200_000))
    output = tmp_path / "backup.tar.gz"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_STORE_")}
    for round_number in range(3):
        exports = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bridge_store",
                    "export",
                    *arguments,
                    "--output",
                    str(output),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ,
            )
            for _ in range(2)
        ]
        for export in exports:
            _, err = export.communicate(timeout=300)
            assert export.returncode == 0, err
        target = sqlite_arguments(tmp_path / f"restored{round_number}.db")
        assert main(["db", "upgrade", *target]) == 0
        assert main(["import", *target, "--input", str(output)]) == 0, capsys.readouterr().err
        assert _mode(output) == 0o600
    # Each export's partial file was its own, and none is left.
    assert not [path.name for path in tmp_path.iterdir() if "partial" in path.name]


def test_an_interrupted_exports_partial_file_is_removed_by_the_next(
    source: list[str], tmp_path: Path
) -> None:
    output = tmp_path / "backup.tar.gz"
    stale = output.with_name(f".{output.name}.killed09.partial")
    stale.write_bytes(b"half an archive")
    stale.chmod(0o600)
    assert main(["export", *source, "--output", str(output)]) == 0
    assert not stale.exists()
