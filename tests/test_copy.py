"""``bridge-store copy``: every backend to every other through the backend API, resumable,
idempotent, keeping differences unless told, and verified."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge_store.backend.substores import RunEventStore
from bridge_store.cli import main
from bridge_store.conformance.harness import agent, run
from bridge_store.errors import ConnectError, unavailable
from bridge_store.lifecycle import walk
from bridge_store.lifecycle.checks import InvalidItem
from bridge_store.lifecycle.copy import copy_history
from bridge_store.lifecycle.items import canonical
from bridge_store.lifecycle.progress import Meter
from bridge_store.lifecycle.tally import Outcome, Tally
from bridge_store.security.encryption import new_key_line
from bridge_store.stack.stores import Routes, Stores
from bridge_store.types import Document
from tests.support.lifecycle import TENANTS, on_stores, open_memory, seed, snapshot
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments


def end_flags(arguments: list[str], end: str) -> list[str]:
    """serve's storage arguments as copy's ``--from``/``--to`` flags."""
    return [
        f"--{end}"
        if flag == "--store"
        else flag.replace("--", f"--{end}-", 1)
        if flag.startswith("--")
        else flag
        for flag in arguments
    ]


def routes(arguments: list[str]) -> Routes:
    flags = dict(zip(arguments[::2], arguments[1::2], strict=True))
    store = flags["--store"]
    return Routes(
        agents=flags.get("--agents", store),
        runs=flags.get("--runs", store),
        run_events=flags.get("--run-events", store),
        checkpoints=flags.get("--checkpoints", store),
    )


def sqlite_arguments(path: Path) -> list[str]:
    return ["--store", f"sqlite:///{path}"]


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_copy_to_and_from_every_backend(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kind").mkdir()
    source = sqlite_arguments(tmp_path / "source.db")
    middle = serve_arguments(kind, request, tmp_path / "kind")
    back = sqlite_arguments(tmp_path / "back.db")
    on_stores(routes(source), lambda stores: seed(stores, blob_size=70_000))
    copy = ["copy", "--verify"]
    assert main([*copy, *end_flags(source, "from"), *end_flags(middle, "to")]) == 0
    out = capsys.readouterr().out
    assert "agents 6 (6 created); runs 12 (12 created); runEvents 60 (60 created)" in out
    assert "checkpoints 12 (12 created)" in out
    assert "verified: both stores hold the same history" in out
    assert main([*copy, *end_flags(middle, "from"), *end_flags(back, "to")]) == 0
    expected = on_stores(routes(source), snapshot)
    assert on_stores(routes(middle), snapshot) == expected
    assert on_stores(routes(back), snapshot) == expected
    # Again: everything is there already.
    capsys.readouterr()
    assert main([*copy, *end_flags(source, "from"), *end_flags(middle, "to")]) == 0
    out = capsys.readouterr().out
    assert "agents 6 (6 same); runs 12 (12 same); runEvents 60 (60 same)" in out


def test_differences_are_left_alone_unless_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    on_stores(routes(sqlite_arguments(source)), lambda stores: seed(stores, agents=2))
    flags = [
        *end_flags(sqlite_arguments(source), "from"),
        *end_flags(sqlite_arguments(target), "to"),
    ]
    assert main(["copy", *flags]) == 0

    async def change(stores: Stores) -> None:
        doc = await stores.agents.get("default", "agent-1")
        assert doc is not None
        await stores.agents.update("default", {**doc, "name": "changed in the target"})
        await stores.checkpoints.update("default", "agent-0", "blob-1", b"other")

    on_stores(routes(sqlite_arguments(target)), change)
    capsys.readouterr()
    assert main(["copy", *flags]) == 1
    out = capsys.readouterr().out
    assert "agents: agent agent-1 of tenant default differs; left alone" in out
    assert "checkpoints: blob blob-1 of agent agent-0 of tenant default differs" in out
    assert main(["copy", "--verify", *flags]) == 1
    assert "agent agent-1 of tenant default differs" in capsys.readouterr().out
    assert main(["copy", "--overwrite", "--verify", *flags]) == 0
    assert "verified" in capsys.readouterr().out
    expected = on_stores(routes(sqlite_arguments(source)), snapshot)
    assert on_stores(routes(sqlite_arguments(target)), snapshot) == expected


async def _created_by_auth_token(stores: Stores) -> None:
    """An agent and a run as serve's one token writes them: created by ``auth-token``."""
    await stores.agents.create("default", agent("agent-1", updated_at=1), "auth-token")
    await stores.runs.create("default", run("run-1", "agent-1"), "alice@laptop")
    await stores.runs.create("default", run("run-2", "agent-1", turn_number=2))


async def _creators(stores: Stores) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    runs = [("agent-1", "run-1"), ("agent-1", "run-2")]
    return (
        await stores.agents.creators("default", ["agent-1"]),
        await stores.runs.creators("default", runs),
    )


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_copy_keeps_who_created_each_agent_and_run(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # From SQLite to Postgres, "created by auth-token" came out "unknown".
    source = sqlite_arguments(tmp_path / "source.db")
    (tmp_path / "kind").mkdir()
    target = serve_arguments(kind, request, tmp_path / "kind")
    on_stores(routes(source), _created_by_auth_token)
    assert main(["copy", *end_flags(source, "from"), *end_flags(target, "to")]) == 0
    expected = ({"agent-1": "auth-token"}, {("agent-1", "run-1"): "alice@laptop"})
    assert on_stores(routes(target), _creators) == expected


async def test_a_copied_creator_that_is_no_token_name_is_refused() -> None:
    source, target = await open_memory(), await open_memory()
    try:
        await source.stores.agents.create("default", agent("agent-1"), "\x1b[31mred")
        with pytest.raises(InvalidItem, match=r"creator '\\x1b\[31mred' is not a token name"):
            await copy_history(source.stores, target.stores, tenants=None, overwrite=False)
        assert await target.stores.agents.get("default", "agent-1") is None
    finally:
        await source.close()
        await target.close()


def test_one_tenant_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    on_stores(routes(sqlite_arguments(source)), seed)
    flags = [
        *end_flags(sqlite_arguments(source), "from"),
        *end_flags(sqlite_arguments(target), "to"),
    ]
    assert main(["copy", "--tenant", "team-b", "--verify", *flags]) == 0
    copied = on_stores(routes(sqlite_arguments(target)), snapshot)
    assert copied
    assert all(key.startswith("team-b/") for key in copied)
    assert copied == on_stores(
        routes(sqlite_arguments(source)), lambda stores: snapshot(stores, ("team-b",))
    )


def test_secrets_are_opened_with_the_source_key_and_sealed_with_the_target_key(
    tmp_path: Path,
) -> None:
    source_keys, target_keys = tmp_path / "source.keys", tmp_path / "target.keys"
    source_keys.write_text(new_key_line() + "\n")
    target_keys.write_text(new_key_line() + "\n")
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    plain = {"from": sqlite_arguments(source), "to": sqlite_arguments(target)}
    # Seeded through serve's sealing: the source holds ciphertext under its key.
    assert main(["copy", "--from", "memory://", *end_flags(plain["from"], "to")]) == 0
    on_stores(routes(plain["from"]), lambda stores: seed(stores, agents=1, tenants=("default",)))
    assert (
        main(
            [
                "copy",
                *end_flags(plain["from"], "from"),
                "--to",
                f"sqlite:///{tmp_path / 'sealed.db'}",
                "--to-encryption-key-file",
                str(source_keys),
            ]
        )
        == 0
    )
    sealed = sqlite_arguments(tmp_path / "sealed.db")
    assert (
        main(
            [
                "copy",
                "--verify",
                *end_flags(sealed, "from"),
                "--from-encryption-key-file",
                str(source_keys),
                *end_flags(plain["to"], "to"),
                "--to-encryption-key-file",
                str(target_keys),
            ]
        )
        == 0
    )
    raw_target = on_stores(routes(plain["to"]), lambda s: snapshot(s, ("default",)))
    raw_sealed = on_stores(routes(sealed), lambda s: snapshot(s, ("default",)))
    original = on_stores(routes(plain["from"]), lambda s: snapshot(s, ("default",)))
    blob = "default/blob/agent-0/blob-0"
    # Both hold ciphertext, under different keys, of the same plaintext.
    assert len({raw_target[blob], raw_sealed[blob], original[blob]}) == 3
    assert raw_target["default/agent/agent-0"] != original["default/agent/agent-0"]
    assert raw_target["default/events/run-0-0"] == original["default/events/run-0-0"]


async def test_copy_while_the_source_is_written_keeps_what_came_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Small pages, so the agents touched meanwhile move past the copy's cursor.
    monkeypatch.setattr(walk, "PAGE", 3)
    source_opened, target_opened = await open_memory(), await open_memory()
    source, target = source_opened.stores, target_opened.stores
    await seed(source, agents=30, runs=2, events=20, blobs=1)
    before = await snapshot(source)
    stop = asyncio.Event()

    async def write_meanwhile() -> None:
        # Touch agents the copy has not reached yet, which moves them to the front of
        # the list order, past the copy's cursor, and keep appending to their runs.
        number = 0
        while not stop.is_set():
            for tenant in TENANTS:
                agent_id = f"agent-{number % 30}"
                doc = await source.agents.get(tenant, agent_id)
                assert doc is not None
                doc["updatedAt"] = int(time.time() * 1000)
                await source.agents.update(tenant, doc)
                await source.run_events.append(
                    tenant,
                    {
                        "runId": f"run-{number % 30}-0",
                        "eventType": "live",
                        "payload": number,
                        "payloadRef": None,
                        "idempotencyKey": None,
                        "createdAt": 0,
                    },
                )
            number += 1
            await asyncio.sleep(0)

    writer = asyncio.create_task(write_meanwhile())
    await copy_history(source, target, tenants=None, overwrite=False)
    stop.set()
    await writer
    after = await snapshot(target)
    for key, value in before.items():
        if "/agent/" in key:
            assert key in after  # updated meanwhile, so possibly newer: present is enough
        elif "/events/" in key:
            assert after[key][: len(value)] == value
        else:
            assert after[key] == value
    for opened in (source_opened, target_opened):
        await opened.close()


def test_kill_9_mid_copy_then_rerun_finishes_without_duplicates(tmp_path: Path) -> None:
    source, target = tmp_path / "a.db", tmp_path / "b.db"
    on_stores(
        routes(sqlite_arguments(source)),
        lambda stores: seed(stores, agents=20, runs=4, events=150, blobs=1, tenants=("default",)),
    )
    flags = [
        *end_flags(sqlite_arguments(source), "from"),
        *end_flags(sqlite_arguments(target), "to"),
    ]
    command = [sys.executable, "-m", "bridge_store", "copy", *flags]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        copied = 0
        while copied < 1000:
            assert process.poll() is None, "the copy finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
            copied = _events_in(target)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert 0 < _events_in(target) < 20 * 4 * 150
    rerun = subprocess.run([*command, "--verify"], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert "verified" in rerun.stdout
    assert _events_in(target) == 20 * 4 * 150
    assert on_stores(routes(sqlite_arguments(target)), snapshot) == on_stores(
        routes(sqlite_arguments(source)), snapshot
    )


def _events_in(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM run_events").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # the schema is not there yet


def test_documents_compare_as_json_text() -> None:
    assert canonical({"b": 1, "a": [True]}) == canonical({"a": [True], "b": 1})
    assert canonical({"a": 1}) != canonical({"a": 1.0})
    assert canonical({"a": 1}) != canonical({"a": True})
    assert canonical(-0.0) != canonical(0.0)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_a_terminal_shows_a_table_per_substore_and_a_pipe_only_the_summary() -> None:
    source_opened, target_opened = await open_memory(), await open_memory()
    await seed(source_opened.stores, agents=2, tenants=("default",))
    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        meter = Meter(Tally(), verb="copied", stream=stream)
        async with meter.showing():
            meter.agents_total = 2
            await copy_history(
                source_opened.stores,
                target_opened.stores,
                tenants=None,
                overwrite=stream is pipe,
                tally=meter.tally,
                on_agent=meter.agent_done,
            )
        assert meter.summary().startswith("copied: agents 2 (2 ")
    shown = screen.getvalue()
    for row in ("agents", "runs", "runEvents", "checkpoints"):
        assert row in shown
    assert "2/2" in shown
    assert pipe.getvalue() == ""
    for opened in (source_opened, target_opened):
        await opened.close()


class FailingRestores:
    """A runEvents substore whose backend goes away after a few restores."""

    def __init__(self, inner: RunEventStore, working: int) -> None:
        self._inner = inner
        self.working = working

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def restore(self, tenant: str, run_id: str, events: Sequence[Document]) -> int:
        if self.working == 0:
            raise unavailable("runEvents.restore: database unreachable")
        self.working -= 1
        return await self._inner.restore(tenant, run_id, events)


async def test_an_outage_stops_the_copy_with_the_cause_and_a_rerun_finishes_it() -> None:
    source_opened, target_opened = await open_memory(), await open_memory()
    await seed(source_opened.stores, agents=6, runs=2)
    target = target_opened.stores
    failing = FailingRestores(target.run_events, working=5)
    flaky = dataclasses.replace(target, run_events=failing)  # type: ignore[arg-type]
    with pytest.raises(ConnectError, match="database unreachable"):
        await copy_history(source_opened.stores, flaky, tenants=None, overwrite=False)
    failing.working = 1_000
    tally = await copy_history(source_opened.stores, flaky, tenants=None, overwrite=False)
    assert tally.total(Outcome.DIFFERENT) == 0
    assert tally.counts["runEvents"][Outcome.SAME] > 0
    assert await snapshot(target) == await snapshot(source_opened.stores)
    for opened in (source_opened, target_opened):
        await opened.close()
