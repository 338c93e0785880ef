"""``bridge-store export`` and ``import``: one archive, restored into every backend,
resumably, refused when damaged, readable without bridge-store."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.stack.stores import Stores
from tests.support.lifecycle import on_stores, seed, snapshot
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments
from tests.test_copy import _created_by_auth_token, _creators, routes, sqlite_arguments


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, list[str]]:
    """An archive of a seeded SQLite store, and that store's arguments."""
    source = sqlite_arguments(tmp_path / "source.db")
    on_stores(routes(source), lambda stores: seed(stores, events=7, blob_size=50_000))
    path = tmp_path / "backup.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    return path, source


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_export_then_import_into_every_backend(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    archive: tuple[Path, list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, source = archive
    (tmp_path / "kind").mkdir()
    target = serve_arguments(kind, request, tmp_path / "kind")
    capsys.readouterr()
    assert main(["import", *target, "--input", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "agents 6 (6 created); runs 12 (12 created); runEvents 84 (84 created)" in out
    assert "verified" in out
    assert on_stores(routes(target), snapshot) == on_stores(routes(source), snapshot)
    # Exported again from there, the archive holds the same items.
    again = tmp_path / "again.tar.gz"
    assert main(["export", *target, "--output", str(again)]) == 0
    assert _contents(again) == _contents(path)


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_export_then_import_keeps_who_created_each_agent_and_run(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # A backup restored read "created by unknown" for every agent and run.
    source = sqlite_arguments(tmp_path / "source.db")
    on_stores(routes(source), _created_by_auth_token)
    path = tmp_path / "backup.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    (tmp_path / "kind").mkdir()
    target = serve_arguments(kind, request, tmp_path / "kind")
    assert main(["import", *target, "--input", str(path)]) == 0
    expected = ({"agent-1": "auth-token"}, {("agent-1", "run-1"): "alice@laptop"})
    assert on_stores(routes(target), _creators) == expected


def test_an_archived_creator_that_is_no_token_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = sqlite_arguments(tmp_path / "source.db")
    on_stores(routes(source), _created_by_auth_token)
    path = tmp_path / "backup.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    contents = dict(_members(path))
    named = {info.name: (info, data) for info, data in contents.items()}
    agents = named["agents.jsonl"][1].replace(b'"auth-token"', b'"\\u001b[31mred"')
    manifest = json.loads(named["manifest.json"][1])
    # A consistent archive (its manifest names the forged member's digest and size).
    manifest["members"]["agents.jsonl"] = {
        "sha256": hashlib.sha256(agents).hexdigest(),
        "size": len(agents),
    }
    replaced = {"agents.jsonl": agents, "manifest.json": json.dumps(manifest).encode()}
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(forged, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in contents.items():
            data = replaced.get(info.name, data)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target = sqlite_arguments(tmp_path / "target.db")
    capsys.readouterr()
    assert main(["import", *target, "--input", str(forged)]) != 0
    assert "is not a token name" in capsys.readouterr().err


def test_import_twice_imports_nothing_new(
    tmp_path: Path, archive: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = archive
    target = sqlite_arguments(tmp_path / "target.db")
    assert main(["import", *target, "--input", str(path)]) == 0
    capsys.readouterr()
    assert main(["import", *target, "--input", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "agents 6 (6 same); runs 12 (12 same); runEvents 84 (84 same)" in out


def test_an_interrupted_import_is_finished_by_the_next(
    tmp_path: Path, archive: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, source = archive
    target = sqlite_arguments(tmp_path / "target.db")
    # What an import stopped half-way leaves: some blobs, runs and the first events.
    partial = tmp_path / "partial.tar.gz"
    assert main(["export", *source, "--output", str(partial), "--tenant", "team-b"]) == 0
    assert main(["import", *target, "--input", str(partial)]) == 0

    async def drop_agents_and_late_events(stores: Stores) -> None:
        await stores.agents.delete("team-b", None, None)
        await stores.run_events.delete("team-b", ["run-2-1"])

    on_stores(routes(target), drop_agents_and_late_events)
    capsys.readouterr()
    assert main(["import", *target, "--input", str(path), "--verify"]) == 0
    assert "verified" in capsys.readouterr().out
    assert on_stores(routes(target), snapshot) == on_stores(routes(source), snapshot)


def test_a_damaged_archive_is_refused_before_anything_is_written(
    tmp_path: Path, archive: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = archive
    members = _members(path)
    target = tmp_path / "target.db"
    for name in ("runEvents.jsonl", "checkpoints/"):
        damaged = tmp_path / "damaged.tar.gz"
        with tarfile.open(damaged, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for info, data in members:
                if info.name.startswith(name):
                    data = data[:-2] + bytes([data[-2] ^ 1]) + data[-1:]
                tar.addfile(info, io.BytesIO(data))
        assert main(["import", *sqlite_arguments(target), "--input", str(damaged)]) == 2
        assert "is damaged (its SHA-256 differs)" in capsys.readouterr().err
        assert not target.exists()
    newer = tmp_path / "newer.tar.gz"
    with tarfile.open(newer, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if info.name == "bridge-store-archive.json":
                data = b'{"format": "bridge-store-archive", "version": 2}'
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert main(["import", *sqlite_arguments(target), "--input", str(newer)]) == 2
    assert "archive format version 2" in capsys.readouterr().err
    (tmp_path / "not.tar.gz").write_bytes(gzip.compress(b"hello"))
    assert main(["import", *sqlite_arguments(target), "--input", str(tmp_path / "not.tar.gz")]) == 2
    assert not target.exists()


def test_an_archive_that_cannot_be_written_is_one_line(
    archive: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, source = archive
    capsys.readouterr()
    output = tmp_path / "missing" / "backup.tar.gz"
    assert main(["export", *source, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"bridge-store: cannot write the archive {output}: No such file or directory: "
        "choose an --output in a directory you can write, with room for the store"
    ]


def test_the_archive_reads_without_bridge_store(archive: tuple[Path, list[str]]) -> None:
    """What docs/archive.md promises, with tarfile, json and hashlib only."""
    path, _ = archive
    members = {info.name: (info, data) for info, data in _members(path)}
    names = list(members)
    assert names[0] == "bridge-store-archive.json"
    assert names[-4:] == ["manifest.json", "runs.jsonl", "runEvents.jsonl", "agents.jsonl"]
    assert json.loads(members[names[0]][1]) == {"format": "bridge-store-archive", "version": 1}
    manifest = json.loads(members["manifest.json"][1])
    assert manifest["version"] == 1
    assert manifest["tenants"]["team-b"] == {
        "agents": 3,
        "runs": 6,
        "runEvents": 42,
        "checkpoints": 6,
    }
    for name, described in manifest["members"].items():
        data = members[name][1]
        assert hashlib.sha256(data).hexdigest() == described["sha256"]
        assert len(data) == described["size"]
    blobs = [name for name in names if name.startswith("checkpoints/")]
    assert len(blobs) == 12
    tenant, agent_hex, blob_hex = blobs[0].removeprefix("checkpoints/").split("/")
    assert (tenant, bytes.fromhex(agent_hex).decode(), bytes.fromhex(blob_hex).decode()) == (
        "default",
        "agent-2",  # the most recently updated agent comes first
        "blob-0",
    )
    info, data = members[blobs[0]]
    assert info.pax_headers["bridge-store.sha256"] == hashlib.sha256(data).hexdigest()
    events = [json.loads(line) for line in members["runEvents.jsonl"][1].splitlines()]
    first = events[0]
    assert set(first) == {"tenant", "event"}
    assert (first["event"]["seq"], first["event"]["offset"]) == (1, "1")
    assert len(manifest["agents"]) == 6


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path, "r:gz") as tar:
        members = []
        for info in tar:
            data = tar.extractfile(info)
            assert data is not None
            members.append((info, data.read()))
        return members


def _contents(path: Path) -> dict[str, bytes]:
    """Each member's bytes but the manifest's time of writing."""
    contents = {}
    for info, data in _members(path):
        if info.name == "manifest.json":
            manifest = json.loads(data)
            del manifest["createdAt"]
            data = json.dumps(manifest).encode()
        contents[info.name] = data
    return contents
