"""``bridge-store prune``: old agents go whole, in the bridge's order; active ones stay."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import main, parse_args
from bridge_store.cli.shared.store_options import routes_from
from bridge_store.errors import ConnectError
from bridge_store.lifecycle.durations import describe_age, parse_age
from bridge_store.lifecycle.prune import PruneCriteria, prune
from bridge_store.stack.stores import Routes, Stores, open_stores
from tests.support.retention import (
    DAY_MS,
    EVENTS_PER_RUN,
    OLD_BLOB_BYTES,
    OTHER_TENANT,
    add_agent,
    agent_ids,
    event_count,
    holdings,
    seed,
)
from tests.support.stores import DURABLE_STORE_KINDS, serve_arguments

T = TypeVar("T")


def on_store(arguments: list[str], work: Callable[[Stores], Awaitable[T]]) -> T:
    """Run ``work`` on the stores that ``arguments`` (storage flags) name."""
    routes = routes_from(parse_args(["prune", *arguments, "--older-than", "1d"]), {})

    async def main_() -> T:
        opened = await open_stores(get_plugin_manager(), routes, migrate=True)
        try:
            return await work(opened.stores)
        finally:
            await opened.close()

    return asyncio.run(main_())


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [r.getMessage() for r in caplog.records if r.name == "bridge_store.audit"]
    return [json.loads(line.removeprefix("audit ")) for line in lines]


def test_ages_parse_and_print() -> None:
    assert parse_age("90d") == 90 * 86_400
    assert parse_age("12h") == 12 * 3600
    assert parse_age("2w") == 14 * 86_400
    for bad in ("90", "d", "0d", "-1d", "1y", "1.5d"):
        with pytest.raises(ValueError, match="not an age"):
            parse_age(bad)
    assert describe_age(parse_age("90d")) == "90d"
    assert describe_age(parse_age("14d")) == "2w"


def test_prune_says_one_run_not_one_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'one.db'}"]

    async def one_of_each(stores: Stores) -> None:
        await add_agent(
            stores, "default", "lone", age_days=200, runs=("finished",), blobs={"b": b"x"}
        )

    on_store(store, one_of_each)
    assert main(["prune", *store, "--older-than", "90d", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    events = f"{EVENTS_PER_RUN} event{'' if EVENTS_PER_RUN == 1 else 's'}"
    assert out[0].endswith(f"): 1 run, {events}, 1 blob (1 byte)")
    assert out[-1] == f"would prune 1 agent older than 90d: 1 run, {events}, 1 blob (1 byte)"
    assert main(["prune", *store, "--older-than", "90d"]) == 0
    assert capsys.readouterr().out.strip() == (
        "pruned 1 agent older than 90d: 1 run with their events, 1 blob"
    )


@pytest.mark.parametrize("kind", DURABLE_STORE_KINDS)
def test_prune_deletes_old_agents_whole_and_keeps_active_and_new(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = serve_arguments(kind, request, tmp_path)
    on_store(store, seed)

    assert main(["prune", *store, "--older-than", "90d", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    # Three old agents without an active run (two tenants); old-busy is counted as kept.
    assert len([line for line in out if line.startswith("would prune agent")]) == 3
    archived = next(line for line in out if "old-archived of tenant default" in line)
    events = 2 * EVENTS_PER_RUN
    assert f"2 runs, {events} events, 2 blobs ({OLD_BLOB_BYTES} bytes)" in archived
    assert out[-1] == (
        f"would prune 3 agents older than 90d: 4 runs, {2 * events} events, 4 blobs "
        f"({2 * OLD_BLOB_BYTES} bytes); 1 with an active run kept"
    )

    def untouched(stores: Stores) -> Awaitable[set[str]]:
        return agent_ids(stores)

    assert on_store(store, untouched) == {"old-archived", "old-idle", "old-busy", "fresh"}

    with caplog.at_level(logging.INFO, logger="bridge_store.audit"):
        assert main(["prune", *store, "--older-than", "90d"]) == 0
    assert capsys.readouterr().out.strip() == (
        "pruned 3 agents older than 90d: 4 runs with their events, 4 blobs; "
        "1 with an active run kept"
    )

    async def after(stores: Stores) -> dict[str, Any]:
        return {
            "default": await agent_ids(stores),
            "other": await agent_ids(stores, OTHER_TENANT),
            "gone": await holdings(stores, "default", "old-archived"),
            "gone events": await event_count(stores, "default", "old-archived-run-1"),
            "busy": await holdings(stores, "default", "old-busy"),
            "fresh": await holdings(stores, "default", "fresh"),
        }

    state = on_store(store, after)
    assert state["default"] == {"old-busy", "fresh"}
    assert state["other"] == set()
    assert state["gone"] == (0, 0, 0)
    assert state["gone events"] == 0
    assert state["busy"] == (2, 2 * EVENTS_PER_RUN, 0)
    assert state["fresh"] == (1, EVENTS_PER_RUN, 1)
    # The order of the deletes, audited as CallStore deletes are.
    default_archived = [
        (line["substore"], line["filter"])
        for line in audit_lines(caplog)
        if line["tenant"] == "default"
        and "old-archived" in json.dumps(line["filter"])
        and line["token"] == "prune"
    ]
    runs = ["old-archived-run-1", "old-archived-run-2"]
    assert default_archived == [
        ("runEvents", {"runIds": runs}),
        ("runs", {"agentIds": ["old-archived"], "runIds": runs}),
        ("checkpoints", {"agentIds": ["old-archived"]}),
        ("agents", {"agentIds": ["old-archived"]}),
    ]


async def pruned_ids(stores: Stores, criteria: PruneCriteria) -> set[str]:
    report = await prune(stores, criteria, principal_name="test")
    return {f"{agent.tenant}/{agent.agent_id}" for agent in report.agents}


async def test_filters_pick_status_cwd_and_tenant() -> None:
    opened = await open_stores(get_plugin_manager(), _memory(), migrate=True)
    stores = opened.stores
    cutoff = int(time.time() * 1000) - 90 * DAY_MS
    await seed(stores)
    assert await pruned_ids(stores, PruneCriteria(cutoff, statuses=frozenset({"idle"}))) == {
        "default/old-idle"
    }
    await seed_again(stores)
    assert await pruned_ids(stores, PruneCriteria(cutoff, cwd="/work/app")) == {
        "default/old-archived",
        f"{OTHER_TENANT}/old-archived",
    }
    await seed_again(stores)
    assert await pruned_ids(stores, PruneCriteria(cutoff, tenants=[OTHER_TENANT])) == {
        f"{OTHER_TENANT}/old-archived"
    }
    # An agent exactly at the cutoff, or newer, stays.
    younger = int(time.time() * 1000) - 400 * DAY_MS + 1
    assert await pruned_ids(stores, PruneCriteria(younger - 1)) == set()
    await opened.close()


async def seed_again(stores: Stores) -> None:
    """Put back what the seed has and a prune took (other agents are still there)."""
    for tenant in ("default", OTHER_TENANT):
        if "old-archived" not in await agent_ids(stores, tenant):
            await add_agent(stores, tenant, "old-archived", age_days=365, runs=("finished",))
    if "old-idle" not in await agent_ids(stores):
        await add_agent(stores, "default", "old-idle", age_days=200, status="idle", cwd="/o")


async def test_an_agent_touched_while_pruning_or_named_active_is_kept() -> None:
    opened = await open_stores(get_plugin_manager(), _memory(), migrate=True)
    stores = opened.stores
    await add_agent(stores, "default", "resumed", age_days=100, runs=("finished",))
    await add_agent(stores, "default", "marked", age_days=100, status="error")
    marked = await stores.agents.get("default", "marked")
    assert marked is not None
    await stores.agents.update("default", {**marked, "activeRunId": "run-x"})
    resumed = await stores.agents.get("default", "resumed")
    assert resumed is not None
    calls = 0

    async def bridge_resumes_it() -> bool:
        # Between listing and deleting, a bridge updates the agent.
        nonlocal calls
        calls += 1
        await stores.agents.update("default", {**resumed, "updatedAt": resumed["updatedAt"] + 1})
        return True

    cutoff = int(time.time() * 1000) - 90 * DAY_MS
    report = await prune(
        stores, PruneCriteria(cutoff), principal_name="test", keep_going=bridge_resumes_it
    )
    assert calls == 2
    assert report.agents == []
    assert report.skipped_active == 2
    assert await agent_ids(stores) == {"resumed", "marked"}
    assert await holdings(stores, "default", "resumed") == (1, EVENTS_PER_RUN, 0)
    await opened.close()


def test_prune_needs_an_age(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["prune", "--store", "memory://"])
    with pytest.raises(SystemExit):
        parse_args(["prune", "--store", "memory://", "--older-than", "soon"])
    assert "not an age" in capsys.readouterr().err


def _memory() -> Routes:
    return Routes.single("memory://")


async def test_a_prune_interrupted_at_any_step_is_finished_by_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bridge_store.errors import unavailable
    from bridge_store.lifecycle.gc import collect_garbage

    cutoff = int(time.time() * 1000) - 90 * DAY_MS
    for step in ("run_events", "runs", "checkpoints", "agents"):
        opened = await open_stores(get_plugin_manager(), _memory(), migrate=True)
        stores = opened.stores
        await add_agent(
            stores, "default", "old", age_days=200, runs=("finished",), blobs={"b": b"x"}
        )
        substore = getattr(stores, step)
        real_delete = substore.delete

        async def outage(*args: Any) -> None:
            raise unavailable("the backend went away")

        monkeypatch.setattr(substore, "delete", outage)
        with pytest.raises(ConnectError):
            await prune(stores, PruneCriteria(cutoff), principal_name="test")
        # The agent row goes last, so it is still there for the next prune to find.
        assert await agent_ids(stores) == {"old"}
        monkeypatch.setattr(substore, "delete", real_delete)
        report = await prune(stores, PruneCriteria(cutoff), principal_name="test")
        assert [agent.agent_id for agent in report.agents] == ["old"]
        assert await agent_ids(stores) == set()
        assert await holdings(stores, "default", "old") == (0, 0, 0)
        assert await event_count(stores, "default", "old-run-1") == 0
        # Nothing was left for gc.
        assert (await collect_garbage(stores)).tenants == []
        await opened.close()
