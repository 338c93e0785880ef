"""Large checkpoint blobs are read in pieces on SQL, and come back exactly.

On SQLite through the incremental blob API inside one read transaction, on Postgres a
few MiB per round trip inside one REPEATABLE READ transaction
(backends/bridge_store_sql/blob_reads.py). Every size around the bounds comes back
byte for byte, a missing blob is None, and the reads leave no transaction open behind
them (a write and another read follow at once).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge_store.backend.plugins import get_plugin_manager, open_backend
from bridge_store_sql.backend import SqlBackend
from bridge_store_sql.blob_reads import LARGE_BLOB_BYTES, PIECE_BYTES


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlBackend]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("make_postgres_url")()
    opened = open_backend(get_plugin_manager(), url)
    assert isinstance(opened, SqlBackend)
    await opened.start(migrate=True)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.mark.parametrize(
    "size",
    [0, LARGE_BLOB_BYTES, LARGE_BLOB_BYTES + 1, PIECE_BYTES, PIECE_BYTES * 2 + 5],
)
async def test_a_blob_of_any_size_comes_back_exactly(backend: SqlBackend, size: int) -> None:
    checkpoints = backend.checkpoints
    assert checkpoints is not None
    blob = os.urandom(size)
    await checkpoints.create("t", "a", "b", blob)
    await checkpoints.create("other", "a", "b", b"x" * (LARGE_BLOB_BYTES + 7))
    assert await checkpoints.get("t", "a", "b") == blob
    assert await checkpoints.get("t", "a", "missing") is None
    # Nothing left open: a write, then reads of the new value and of another tenant's.
    newer = os.urandom(size)
    await checkpoints.update("t", "a", "b", newer)
    assert await checkpoints.get("t", "a", "b") == newer
    assert await checkpoints.get("other", "a", "b") == b"x" * (LARGE_BLOB_BYTES + 7)
    await checkpoints.delete("t", None, None)
    assert await checkpoints.get("t", "a", "b") is None
