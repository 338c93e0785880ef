"""One options module for every command: the store URL, the key file and the tenant
read the same way everywhere, environment included (issue 21's tools item)."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.cli.shared.store_options import STORE_ENV
from bridge_store.conformance.harness import agent
from bridge_store.errors import EXIT_CONFIGURATION
from bridge_store.security.encryption import KEY_FILE_ENV, new_key_line
from bridge_store.stack.stores import Routes, Stores
from tests.support.lifecycle import on_stores

#: A blobEncryptionKey no other byte of a store spells by chance.
SECRET_KEY = "5e" * 32
BLOB = b"checkpoint bytes that must not be stored in the clear"
WRITERS = ["import", "import-local", "copy"]


def url(path: Path) -> str:
    return f"sqlite:///{path}"


async def seed_one(stores: Stores) -> None:
    document = agent("agent-1", sdkMetadata={"blobEncryptionKey": SECRET_KEY})
    await stores.agents.create("default", document)
    await stores.checkpoints.create("default", "agent-1", "blob-1", BLOB)


def raw_rows(path: Path) -> str:
    """Every row of a SQLite store, as SQL text: what the backend holds, unopened."""
    with sqlite3.connect(path) as connection:
        return "\n".join(connection.iterdump())


def plaintext_source(tmp_path: Path) -> Path:
    source = tmp_path / "source.db"
    on_stores(Routes.single(url(source)), seed_one)
    return source


def jsonl_store(tmp_path: Path) -> Path:
    """A bridge's JSONL store holding the one agent and its blob."""
    root = tmp_path / "jsonl"
    root.mkdir()
    document = agent("agent-1", sdkMetadata={"blobEncryptionKey": SECRET_KEY})
    (root / "agents.ndjson").write_text(json.dumps(document) + "\n")
    (root / "runs.ndjson").write_text("")
    blob = {"agentId": "agent-1", "blobId": "blob-1", "dataBase64": base64.b64encode(BLOB).decode()}
    (root / "checkpoints.ndjson").write_text(json.dumps(blob) + "\n")
    return root


def writer_arguments(command: str, tmp_path: Path) -> list[str]:
    """``command`` writing the one agent into the store the environment names."""
    if command == "import-local":
        return ["import-local", "--jsonl", str(jsonl_store(tmp_path))]
    source = plaintext_source(tmp_path)
    if command == "copy":
        return ["copy", "--from", url(source)]
    archive = tmp_path / "history.tar.gz"
    assert main(["export", "--store", url(source), "--output", str(archive)]) == 0
    return ["import", "--input", str(archive)]


@pytest.mark.parametrize("command", WRITERS)
def test_the_key_file_of_the_environment_seals_what_is_written(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = writer_arguments(command, tmp_path)
    keys = tmp_path / "store.keys"
    keys.write_text(new_key_line() + "\n")
    target = tmp_path / "target.db"
    monkeypatch.setenv(STORE_ENV, url(target))
    monkeypatch.setenv(KEY_FILE_ENV, str(keys))
    assert main(arguments) == 0
    rows = raw_rows(target)
    assert "agent-1" in rows  # the agent is there ...
    assert SECRET_KEY not in rows  # ... its key sealed,
    assert BLOB.hex() not in rows.lower()  # and its blob too.


@pytest.mark.parametrize("command", ["export", "import", "copy"])
def test_the_store_url_of_the_environment_names_the_store(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if command == "export":
        source = plaintext_source(tmp_path)
        archive = tmp_path / "history.tar.gz"
        monkeypatch.setenv(STORE_ENV, url(source))
        assert main(["export", "--output", str(archive)]) == 0
        assert archive.stat().st_size > 0
        assert main(["import", "--store", url(tmp_path / "t.db"), "--input", str(archive)]) == 0
        target = tmp_path / "t.db"
    else:
        target = tmp_path / "target.db"
        arguments = writer_arguments(command, tmp_path)
        monkeypatch.setenv(STORE_ENV, url(target))
        assert main(arguments) == 0
    # Written where the variable says (no key file anywhere: stored as given).
    assert SECRET_KEY in raw_rows(target)


@pytest.mark.parametrize("command", WRITERS)
def test_a_store_with_sealed_items_is_not_written_without_its_key(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    keys = tmp_path / "store.keys"
    keys.write_text(new_key_line() + "\n")
    target = tmp_path / "target.db"
    sealing = tmp_path / "sealed-first"
    sealing.mkdir()
    first = ["import-local", "--jsonl", str(jsonl_store(sealing)), "--store", url(target)]
    assert main([*first, "--encryption-key-file", str(keys)]) == 0
    before = raw_rows(target)
    arguments = writer_arguments(command, tmp_path)
    monkeypatch.setenv(STORE_ENV, url(target))
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    capsys.readouterr()
    assert main(arguments) == EXIT_CONFIGURATION
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "holds sealed items" in err
    flag = "--to-encryption-key-file" if command == "copy" else "--encryption-key-file"
    assert f"{flag} PATH or {KEY_FILE_ENV}" in err
    assert raw_rows(target) == before  # nothing mixed in
