"""The overview's counts agree with a scan of the history after any sequence of writes.

A Hypothesis state machine creates, updates (moves to another day or model) and
deletes runs, the same run ids under several agents among them, appends events that
end tool calls (and some that do not, some with idempotency keys replayed) and deletes
events, in any order; after every step the counts of each backend that counts them
itself (:class:`~bridge_store.backend.statistics.RunStatistics`: the SQL backend, on SQLite
and Postgres) must equal the scan every other backend's overview uses, over a range
on day bounds and one that is not. The memory and Redis backends answer the overview
with that scan itself (checked below), so there is nothing of theirs to compare.

Each example writes into a tenant of its own in one store per test. Examples are
derandomized (the ``fuzz`` profile of tests/conftest.py), so CI runs the same ones;
``--hypothesis-profile=fuzz-long`` draws new ones, ten times as many.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.backend.statistics import DAY_MS, run_statistics
from bridge_store.conformance.harness import StoreClient, run
from bridge_store.errors import Code, ConnectError
from bridge_store.security.auth import Principal, Scope
from bridge_store.stack.stores import OpenStores, Routes, open_stores
from bridge_store.viewer.overview import scan_counts
from bridge_store.viewer.reader import HistoryReader, in_process
from tests.support.redis import MakeRedisUrl

from .test_overview import normal, tool_event

DAY = 20_600
#: The counted ranges: five whole days, and one that starts and ends mid-day.
RANGES = ((DAY * DAY_MS, (DAY + 5) * DAY_MS), (DAY * DAY_MS + 7_200_000, (DAY + 4) * DAY_MS + 1))
AGENTS = st.sampled_from(["agent-1", "agent-2", "agent-3"])
RUN_IDS = st.sampled_from(["run-1", "run-2", "run-3"])
#: Times of runs: inside the ranges, at their edges and outside them.
TIMES = st.sampled_from(
    [
        (DAY - 1) * DAY_MS + 5,
        DAY * DAY_MS,
        DAY * DAY_MS + 3_600_000,
        (DAY + 2) * DAY_MS + 17,
        (DAY + 4) * DAY_MS,
        (DAY + 5) * DAY_MS - 1,
        (DAY + 5) * DAY_MS,
    ]
)
MODELS = st.sampled_from([{"id": "m-1"}, {"id": "m-2"}, None])
#: Examples per backend in CI; with --hypothesis-profile=fuzz-long, ten times as many.
EXAMPLES = {"sqlite": 40, "postgres": 25}
STEPS = 25


class Store:
    """One store, opened on a loop of its own that the machine's rules run on."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.opened: OpenStores = self.loop.run_until_complete(
            open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
        )
        self._tenants = itertools.count()

    def tenant(self) -> str:
        return f"machine-{next(self._tenants)}"

    def close(self) -> None:
        self.loop.run_until_complete(self.opened.close())
        self.loop.close()


def machine(store: Store) -> type[RuleBasedStateMachine]:
    stores = store.opened.stores

    class Counting(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            tenant = store.tenant()
            self.principal = Principal(name="machine", tenant=tenant, scope=Scope.WRITE)
            self.client = StoreClient(
                stores=stores, manager=get_plugin_manager(), principal=self.principal
            )
            self.calls = itertools.count()

        def attempt(self, substore: str, method: str, data: Any) -> None:
            """A call; a create of a run that exists, an update of one that does not: as
            the client would be told, and nothing written."""
            try:
                store.loop.run_until_complete(self.client.call(substore, method, data))
            except ConnectError as error:
                if error.code not in (Code.ALREADY_EXISTS, Code.NOT_FOUND):
                    raise

        @rule(
            agent=AGENTS,
            run_id=RUN_IDS,
            started=TIMES,
            model=MODELS,
            took=st.sampled_from([None, 0, 90_000]),
            status=st.sampled_from(["finished", "error", "running"]),
            update=st.booleans(),
        )
        def write_run(
            self,
            agent: str,
            run_id: str,
            started: int,
            model: Any,
            took: int | None,
            status: str,
            update: bool,
        ) -> None:
            """Create a run, or update one: to another day or model, or out of range."""
            ended = None if took is None else started + took
            doc = run(run_id, agent, startedAt=started, endedAt=ended, model=model, status=status)
            self.attempt("runs", "update" if update else "create", {"run": doc})

        @rule(
            agents=st.none() | st.lists(AGENTS, min_size=1, max_size=2, unique=True),
            run_ids=st.none() | st.lists(RUN_IDS, min_size=1, max_size=2, unique=True),
        )
        def delete_runs(self, agents: list[str] | None, run_ids: list[str] | None) -> None:
            found: dict[str, list[str]] = {}
            if agents is not None:
                found["agentIds"] = agents
            if run_ids is not None:
                found["runIds"] = run_ids
            self.attempt("runs", "delete", {"filter": found})

        @rule(
            run_id=RUN_IDS,
            tool=st.sampled_from(["grep", "edit_file", None]),
            status=st.sampled_from(["completed", "error", "running"]),
            key=st.sampled_from([None, "k-1", "k-2"]),
        )
        def append(self, run_id: str, tool: str | None, status: str, key: str | None) -> None:
            """An event that ends a tool call (or only starts one), maybe under a key
            a replay reuses: its run may not exist yet, or any more."""
            event = tool_event("agent-1", run_id, f"c{next(self.calls)}", tool, status)
            if key is not None:
                event["idempotencyKey"] = f"{run_id}-{key}"
            self.attempt("runEvents", "append", event)

        @rule(run_ids=st.none() | st.lists(RUN_IDS, min_size=1, max_size=2, unique=True))
        def delete_events(self, run_ids: list[str] | None) -> None:
            filter_ = {} if run_ids is None else {"runIds": run_ids}
            self.attempt("runEvents", "delete", {"filter": filter_})

        @invariant()
        def counts_agree_with_a_scan(self) -> None:
            index = run_statistics(stores.agents, stores.runs)
            assert index is not None
            reader = HistoryReader(in_process(lambda: stores, self.principal))
            tenant = self.principal.tenant
            for since, until in RANGES:
                counted = store.loop.run_until_complete(
                    index.counts(tenant, since=since, until=until)
                )
                scanned = store.loop.run_until_complete(
                    scan_counts(reader, since=since, until=until)
                )
                assert normal(counted) == normal(scanned)

    return Counting


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url_of: dict[str, Callable[[], str]] = {
        "sqlite": lambda: f"sqlite:///{tmp_path / 'store.db'}",
        "postgres": lambda: request.getfixturevalue("make_postgres_url")(),
    }
    store = Store(url_of[request.param]())
    try:
        yield request.param, store
    finally:
        store.close()


def test_the_counts_agree_with_a_scan_after_any_writes(
    backend: tuple[str, Store], request: pytest.FixtureRequest
) -> None:
    name, store = backend
    examples = EXAMPLES[name]
    chosen = settings(
        settings.get_profile("fuzz"), max_examples=examples, stateful_step_count=STEPS
    )
    if request.config.getoption("hypothesis_profile", None) == "fuzz-long":
        chosen = settings(
            settings.get_profile("fuzz-long"), max_examples=examples * 10, stateful_step_count=STEPS
        )
    run_state_machine_as_test(machine(store), settings=chosen)


@pytest.mark.redis
async def test_memory_and_redis_answer_the_overview_by_the_scan(
    make_redis_url: MakeRedisUrl,
) -> None:
    """Nothing of theirs to compare: if one counted itself, the machine would cover it."""
    for url in ("memory://", make_redis_url()):
        opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
        try:
            assert run_statistics(opened.stores.agents, opened.stores.runs) is None
        finally:
            await opened.close()
