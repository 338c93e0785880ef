"""``bridge-store gc``: orphans of every kind go, in any tenant; everything owned stays."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.stack.stores import Stores
from tests.support.retention import (
    EVENTS_PER_RUN,
    OLD_BLOB_BYTES,
    OLD_BLOBS,
    OTHER_TENANT,
    add_agent,
    call,
    event_count,
    holdings,
    seed,
)
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments

from .test_prune import audit_lines, on_store

ORPHANS_ONLY = "team-c"


async def seed_with_orphans(stores: Stores) -> None:
    """The retention seed, plus what a crash or a third-party writer leaves behind."""
    await seed(stores)
    # An agent row deleted alone: its blobs, its runs and their events are orphans.
    await add_agent(stores, "default", "ghost", age_days=5, runs=("finished",), blobs=OLD_BLOBS)
    await stores.agents.delete("default", ["ghost"], None)
    # The bridge's own delete stopped after the runs: the events are left.
    await add_agent(stores, OTHER_TENANT, "half-deleted", age_days=5, runs=("finished",))
    await stores.runs.delete(OTHER_TENANT, ["half-deleted"], None)
    await stores.agents.delete(OTHER_TENANT, ["half-deleted"], None)
    # A tenant with nothing but the events of a run that never was.
    event = {"runId": "run-never", "eventType": "run_stream_event", "payload": None}
    await call(stores, ORPHANS_ONLY, "runEvents", "append", event)


async def state(stores: Stores) -> dict[str, Any]:
    return {
        "ghost blobs": await call(
            stores, "default", "checkpoints", "list", {"filter": {"agentIds": ["ghost"]}}
        ),
        "ghost runs": await call(
            stores, "default", "runs", "list", {"filter": {"agentIds": ["ghost"]}}
        ),
        "ghost events": await event_count(stores, "default", "ghost-run-1"),
        "half-deleted events": await event_count(stores, OTHER_TENANT, "half-deleted-run-1"),
        "never events": await event_count(stores, ORPHANS_ONLY, "run-never"),
        "kept": [
            await holdings(stores, "default", agent_id)
            for agent_id in ("old-archived", "old-busy", "fresh")
        ],
        "kept other": await holdings(stores, OTHER_TENANT, "old-archived"),
    }


KEPT = [(2, 2 * EVENTS_PER_RUN, 2), (2, 2 * EVENTS_PER_RUN, 0), (1, EVENTS_PER_RUN, 1)]


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_gc_deletes_orphans_and_nothing_else(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = serve_arguments(kind, request, tmp_path)
    on_store(store, seed_with_orphans)

    assert main(["gc", *store, "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:-1]) == sorted(
        [
            "would delete 2 checkpoint blobs of agent ghost of tenant default: the agent is gone",
            "would delete run ghost-run-1 of agent ghost of tenant default: the agent is gone",
            "would delete the events of run ghost-run-1 of tenant default: the run is gone",
            f"would delete the events of run half-deleted-run-1 of tenant {OTHER_TENANT}: "
            "the run is gone",
            f"would delete the events of run run-never of tenant {ORPHANS_ONLY}: the run is gone",
        ]
    )
    assert out[-1] == (
        f"would delete 2 orphaned blobs ({OLD_BLOB_BYTES} bytes), 1 run and the events of "
        f"3 runs ({2 * EVENTS_PER_RUN + 1} events)"
    )
    before = on_store(store, state)
    assert len(before["ghost blobs"]["items"]) == 2
    assert before["ghost events"] == EVENTS_PER_RUN

    with caplog.at_level(logging.INFO, logger="bridge_store.audit"):
        assert main(["gc", *store]) == 0
    assert capsys.readouterr().out.strip() == (
        "deleted 2 orphaned blobs, 1 run and the events of 3 runs"
    )
    after = on_store(store, state)
    assert after["ghost blobs"]["items"] == []
    assert after["ghost runs"]["items"] == []
    assert after["ghost events"] == after["half-deleted events"] == after["never events"] == 0
    assert after["kept"] == KEPT
    assert after["kept other"] == (2, 2 * EVENTS_PER_RUN, 2)
    audited = {(line["tenant"], line["substore"], line["token"]) for line in audit_lines(caplog)}
    assert audited == {
        ("default", "checkpoints", "gc"),
        ("default", "runs", "gc"),
        ("default", "runEvents", "gc"),
        (OTHER_TENANT, "runEvents", "gc"),
        (ORPHANS_ONLY, "runEvents", "gc"),
    }
    assert all("ghost" in json.dumps(line["filter"]) for line in audit_lines(caplog)[:2])

    # Nothing is left to collect.
    assert main(["gc", *store]) == 0
    assert capsys.readouterr().out.strip() == (
        "deleted 0 orphaned blobs, 0 runs and the events of 0 runs"
    )


def test_gc_keeps_to_the_tenants_named(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = serve_arguments("sqlite", request, tmp_path)
    on_store(store, seed_with_orphans)
    assert main(["gc", *store, "--tenant", ORPHANS_ONLY]) == 0
    assert "the events of 1 run\n" in capsys.readouterr().out
    after = on_store(store, state)
    assert after["never events"] == 0
    assert after["ghost events"] == EVENTS_PER_RUN
    assert len(after["ghost blobs"]["items"]) == 2
