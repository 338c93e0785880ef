"""``bridge-store import`` attacked the way a team's first week would: two imports of
one archive at once, and a SIGKILL in the middle; the store ends up holding the archive,
nothing twice, and a rerun finishes what was stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridge_store.cli import main
from tests.support.lifecycle import on_stores, seed, snapshot
from tests.test_copy import _events_in, routes, sqlite_arguments

AGENTS, RUNS, EVENTS = 20, 4, 150


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    directory = tmp_path_factory.mktemp("source")
    source = sqlite_arguments(directory / "source.db")
    on_stores(
        routes(source),
        lambda stores: seed(
            stores, agents=AGENTS, runs=RUNS, events=EVENTS, blobs=1, tenants=("default",)
        ),
    )
    path = directory / "backup.tar.gz"
    assert main(["export", *source, "--output", str(path)]) == 0
    return path, source


def _import(target: Path, archive: Path, *more: str) -> list[str]:
    store = f"sqlite:///{target}"
    return [
        sys.executable,
        "-m",
        "bridge_store",
        "import",
        "--store",
        store,
        "--input",
        str(archive),
        *more,
    ]


def test_two_imports_of_one_archive_at_once_both_finish_nothing_twice(
    archive: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, source = archive
    target = tmp_path / "target.db"
    racers = [
        subprocess.Popen(_import(target, path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for racer in racers:
        _, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err.decode()
    assert _events_in(target) == AGENTS * RUNS * EVENTS
    held = on_stores(routes(sqlite_arguments(target)), snapshot)
    assert held == on_stores(routes(source), snapshot)


def test_kill_9_mid_import_then_rerun_finishes(
    archive: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, source = archive
    target = tmp_path / "target.db"
    process = subprocess.Popen(
        _import(target, path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while _events_in(target) < 1000:
            assert process.poll() is None, "the import finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert 0 < _events_in(target) < AGENTS * RUNS * EVENTS
    rerun = subprocess.run(
        _import(target, path, "--verify"), capture_output=True, text=True, timeout=300
    )
    assert rerun.returncode == 0, rerun.stderr
    assert "verified" in rerun.stdout
    held = on_stores(routes(sqlite_arguments(target)), snapshot)
    assert held == on_stores(routes(source), snapshot)
