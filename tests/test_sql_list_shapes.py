"""agents.list and runs.list: one statement per shape, built once, the same rows as ever.

Building and compiling a list statement per call cost more than twice an append on
SQLite (docs/performance.md); each shape is now built once with bound parameters.
These tests pin that the shapes are reused, and that every shape (by cwd or not, one
to eight ids, empty and longer id lists, first and later pages) reads exactly the
rows the contract's order gives, on a real SQLite database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import pysqlite

from bridge_store.backend.substores import AgentPosition, RunPosition
from bridge_store_sql import agents, runs, tables
from bridge_store_sql.sqlite import SqliteSession
from bridge_store_sql.statements import Compiler

AGENTS = [(f"agent-{n:02d}", f"/work/{n % 3}", 100 + n // 2) for n in range(20)]
#: Runs of every agent, turn numbers repeating so the tie-breaks decide the order.
RUNS = [(f"agent-{n % 20:02d}", f"run-{n:03d}", n % 7) for n in range(120)]


@pytest.fixture
def session() -> Iterator[SqliteSession]:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    tables.metadata.create_all(sa.create_engine("sqlite://", creator=lambda: connection))
    session = SqliteSession(Compiler(pysqlite.dialect()), connection)
    for tenant in ("default", "other"):
        for agent_id, cwd, updated_at in AGENTS:
            doc = f'{{"agentId": "{agent_id}", "tenant": "{tenant}"}}'
            session.execute(
                sa.insert(tables.agents).values(
                    tenant=tenant, agent_id=agent_id, cwd=cwd, updated_at=updated_at, doc=doc
                )
            )
        for agent_id, run_id, turn in RUNS:
            doc = f'{{"runId": "{run_id}", "agentId": "{agent_id}", "tenant": "{tenant}"}}'
            session.execute(
                sa.insert(tables.runs).values(
                    tenant=tenant, agent_id=agent_id, run_id=run_id, turn_number=turn, doc=doc
                )
            )
    try:
        yield session
    finally:
        connection.close()


def _agents_expected(cwd: str | None, after: AgentPosition | None, limit: int) -> list[str]:
    rows = sorted(
        ((updated, agent_id) for agent_id, c, updated in AGENTS if cwd is None or c == cwd),
        reverse=True,
    )
    if after is not None:
        rows = [row for row in rows if row < (after.updated_at, after.agent_id)]
    return [agent_id for _, agent_id in rows[:limit]]


def _runs_expected(
    agent_ids: list[str] | None, run_ids: list[str] | None, after: RunPosition | None, limit: int
) -> list[str]:
    rows = sorted(
        (turn, run_id, agent_id)
        for agent_id, run_id, turn in RUNS
        if (agent_ids is None or agent_id in agent_ids) and (run_ids is None or run_id in run_ids)
    )
    if after is not None:
        rows = [row for row in rows if row > (after.turn_number, after.run_id, after.agent_id)]
    return [run_id for _, run_id, _ in rows[:limit]]


@pytest.mark.parametrize("cwd", [None, "/work/1"])
@pytest.mark.parametrize("after", [None, AgentPosition(105, "agent-10"), AgentPosition(0, "")])
def test_every_agents_list_shape_reads_the_contract_order(
    session: SqliteSession, cwd: str | None, after: AgentPosition | None
) -> None:
    statement, params = agents.list_statement("default", cwd=cwd, after=after, limit=7)
    docs = session.scalars(statement, params).all()
    assert all('"tenant": "default"' in doc for doc in docs)
    assert [doc.split('"')[3] for doc in docs] == _agents_expected(cwd, after, 7)


@pytest.mark.parametrize(
    "agent_ids",
    [
        None,
        [],
        ["agent-03"],
        ["agent-03", "agent-11", "agent-19"],
        [f"agent-{n:02d}" for n in range(9)],
    ],
)
@pytest.mark.parametrize("run_ids", [None, ["run-005", "run-044", "run-083", "run-119"]])
@pytest.mark.parametrize("after", [None, RunPosition(3, "run-045", "agent-05")])
def test_every_runs_list_shape_reads_the_contract_order(
    session: SqliteSession,
    agent_ids: list[str] | None,
    run_ids: list[str] | None,
    after: RunPosition | None,
) -> None:
    statement, params = runs.list_statement(
        "default", agent_ids=agent_ids, run_ids=run_ids, after=after, limit=11
    )
    docs = session.scalars(statement, params).all()
    assert all('"tenant": "default"' in doc for doc in docs)
    assert [doc.split('"')[3] for doc in docs] == _runs_expected(agent_ids, run_ids, after, 11)


def test_a_shape_is_built_once_and_its_values_are_parameters() -> None:
    first, first_params = agents.list_statement(
        "default", cwd="/a", after=AgentPosition(5, "x"), limit=51
    )
    second, second_params = agents.list_statement(
        "other", cwd="/b", after=AgentPosition(9, "y"), limit=3
    )
    assert first is second
    assert first_params != second_params
    assert agents.list_statement("default", cwd=None, after=None, limit=51)[0] is not first

    one, params = runs.list_statement(
        "default", agent_ids=["a"], run_ids=None, after=None, limit=51
    )
    assert runs.list_statement("t", agent_ids=["b"], run_ids=None, after=None, limit=2)[0] is one
    assert params == {"b_tenant": "default", "b_limit": 51, "b_agent_0": "a"}
    two = runs.list_statement("t", agent_ids=["a", "b"], run_ids=None, after=None, limit=2)[0]
    assert two is not one


@pytest.mark.parametrize("count", [0, runs.SHAPED_IDS_LIMIT + 1])
def test_empty_and_long_id_lists_are_built_per_call(count: int) -> None:
    ids = [f"agent-{n}" for n in range(count)]
    statement, params = runs.list_statement(
        "default", agent_ids=ids, run_ids=None, after=None, limit=5
    )
    assert params is None
    assert (
        runs.list_statement("default", agent_ids=ids, run_ids=None, after=None, limit=5)[0]
        is not statement
    )
