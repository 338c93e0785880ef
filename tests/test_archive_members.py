"""An archive of very many members is read in bounded memory: tarfile's list of the
members it read is emptied as they go, and nothing is kept per blob member; the
tenants counted before the manifest arrives are bounded."""

from __future__ import annotations

import hashlib
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from bridge_store.cli import main
from bridge_store.lifecycle import importer
from bridge_store.lifecycle.archive import ArchiveError
from bridge_store.lifecycle.importer import check_archive
from tests.support.archives import Members, read_members, write_members
from tests.support.lifecycle import on_stores, seed
from tests.test_copy import routes, sqlite_arguments

MEMBERS = 10_000


@pytest.fixture(scope="module")
def good_members(tmp_path_factory: pytest.TempPathFactory) -> Members:
    directory = tmp_path_factory.mktemp("good")
    source = sqlite_arguments(directory / "source.db")
    on_stores(routes(source), lambda stores: seed(stores, agents=1, events=1, blob_size=10))
    path = directory / "good.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    return read_members(path)


def _with_blobs(members: Members, names: list[str]) -> Members:
    """``members`` with a one-byte blob member of each name after the header, each with
    its right digest (so all of them are read)."""
    blobs = []
    for name in names:
        info = tarfile.TarInfo(name)
        info.pax_headers = {"bridge-store.sha256": hashlib.sha256(b"x").hexdigest()}
        blobs.append((info, b"x"))
    return [members[0], *blobs, *members[1:]]


def test_thousands_of_members_are_read_in_bounded_memory(
    good_members: Members, tmp_path: Path
) -> None:
    path = tmp_path / "many.tar.gz"
    names = [f"checkpoints/default/61/{f'{n:08d}'.encode().hex()}" for n in range(MEMBERS)]
    write_members(path, _with_blobs(good_members, names))
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match=f"holds {MEMBERS + 2} checkpoints of tenant"):
            check_archive(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


def test_the_tenants_counted_before_the_manifest_are_bounded(
    good_members: Members, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "MAX_TENANTS", 3)
    path = tmp_path / "tenants.tar.gz"
    names = [f"checkpoints/t{n}/61/62" for n in range(5)]
    write_members(path, _with_blobs(good_members, names))
    with pytest.raises(ArchiveError, match="the archive's blobs are of over 3 tenants"):
        check_archive(path)
