"""An archive holding a blob of hundreds of megabytes (a few hundred kilobytes of gzip) is
read in bounded memory, and refused in one line when the blob is over the request
limit (issue 21: 1.5 GB took 3.2 GB of memory and ended in a SQLite traceback)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.lifecycle.importer import check_archive
from bridge_store.wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
from tests.support.archives import Members, edit_manifest, read_members, rehash, write_members
from tests.support.lifecycle import on_stores, seed
from tests.test_copy import routes, sqlite_arguments

#: The blob: well over the default request limit, a few hundred kilobytes compressed.
BLOB_BYTES = 320 * 1024 * 1024
#: What reading it may take, at most: a small fraction of it.
PEAK_BOUND = 24 * 1024 * 1024
BIG = "checkpoints/default/6167656e742d31/626967"  # agent-1, "big"


@pytest.fixture(scope="module")
def big_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real export plus one zero blob of BLOB_BYTES, counted in the manifest."""
    directory = tmp_path_factory.mktemp("big")
    source = sqlite_arguments(directory / "source.db")
    on_stores(routes(source), lambda stores: seed(stores, agents=2, events=3, blob_size=100))
    good = directory / "good.tar.gz"
    assert main(["export", *source, "--output", str(good)]) == 0

    def one_more_blob(manifest: Any) -> None:
        manifest["tenants"]["default"]["checkpoints"] += 1

    members: Members = rehash(edit_manifest(read_members(good), one_more_blob))
    path = directory / "big.tar.gz"
    write_members(path, members, big={BIG: BLOB_BYTES})
    assert path.stat().st_size < BLOB_BYTES // 100
    return path


def _peak(work: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_blob_is_checked_streaming_in_bounded_memory(big_archive: Path) -> None:
    # With a limit that takes it, the first pass hashes the blob a chunk at a time.
    manifest, peak = _peak(lambda: check_archive(big_archive, limit=1 << 30))
    assert manifest.tenants["default"]["checkpoints"] == 5
    assert peak < PEAK_BOUND, f"peak {peak / 2**20:.1f} MiB"


def test_a_blob_over_the_request_limit_is_refused_in_one_line_in_bounded_memory(
    big_archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target.db"
    arguments = ["import", "--store", f"sqlite:///{target}", "--input", str(big_archive)]
    status, peak = _peak(lambda: main(arguments))
    err = capsys.readouterr().err
    assert peak < PEAK_BOUND, f"peak {peak / 2**20:.1f} MiB"
    assert status == 2
    assert err.splitlines() == [
        "bridge-store: checkpoint blob 'big' of agent 'agent-1' of tenant default is "
        f"{BLOB_BYTES} bytes, over the {DEFAULT_MAX_REQUEST_BYTES}-byte request limit "
        "(--max-request-bytes: no bridge could have stored it through a server with it)"
    ]
    assert not target.exists()
