"""Runs: one hash of documents keyed by (runId, agentId), three ordered indexes.

The row field is ``terminated(runId) + agentId``. Index members (see
:mod:`bridge_store_redis.keys`):

- ``by-turn``: ``int(turnNumber) + field``: the contract's order
  (turnNumber, runId, agentId), for unfiltered lists;
- ``by-agent``: ``terminated(agentId) + int(turnNumber) + terminated(runId)``: one
  contiguous range per agent, in list order;
- ``by-run``: ``terminated(runId) + int(turnNumber) + agentId``: one range per run id.

A list filtered by several agents (or run ids) reads one range per id in one script
and merges the pages here.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Literal

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.substores import RunPosition, run_position
from bridge_store.errors import already_exists, not_found
from bridge_store.types import Document
from bridge_store.wire.jsontext import dumps, loads_document

from ._rows import Range, RowTable, Tenants, tenants_holding
from .errors import redis_errors
from .keys import INT_WIDTH, KeySpace, from_utf8, sortable_int, terminated, utf8
from .scripts import Scripts

_BY_TURN, _BY_AGENT, _BY_RUN = 1, 2, 3


def _field(agent_id: str, run_id: str) -> bytes:
    return terminated(run_id) + utf8(agent_id)


def _order(position: RunPosition) -> tuple[int, str, str]:
    return (position.turn_number, position.run_id, position.agent_id)


class RedisRuns:
    def __init__(self, client: Redis | RedisCluster, keys: KeySpace, scripts: Scripts) -> None:
        self._client = client
        self._root = keys
        self._tables = Tenants(
            lambda tenant: RowTable(
                client, keys.of_tenant(tenant).table("runs", ("turn", "agent", "run")), scripts
            )
        )

    @redis_errors
    async def get(self, tenant: str, agent_id: str, run_id: str) -> Document | None:
        raw = await self._tables.of(tenant).get(_field(agent_id, run_id))
        return loads_document(raw) if raw is not None else None

    @redis_errors
    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        if not await self._put(tenant, "create", run, creator):
            raise already_exists(f"run {run['runId']} of agent {run['agentId']} already exists")
        return run

    @redis_errors
    async def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        names = await self._tables.of(tenant).creators([_field(a, r) for a, r in runs])
        return {key: from_utf8(n) for key, n in zip(runs, names, strict=True) if n is not None}

    @redis_errors
    async def update(self, tenant: str, run: Document) -> Document:
        if not await self._put(tenant, "update", run):
            raise not_found(f"run {run['runId']} of agent {run['agentId']} not found")
        return run

    async def _put(
        self,
        tenant: str,
        mode: Literal["create", "update"],
        run: Document,
        creator: str | None = None,
    ) -> bool:
        agent_id, run_id = run["agentId"], run["runId"]
        field = _field(agent_id, run_id)
        turn = sortable_int(run["turnNumber"])
        members = [
            turn + field,
            terminated(agent_id) + turn + terminated(run_id),
            terminated(run_id) + turn + utf8(agent_id),
        ]
        return await self._tables.of(tenant).put(mode, field, dumps(run), members, creator)

    @redis_errors
    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> None:
        table = self._tables.of(tenant)
        if agent_ids is not None and run_ids is not None:
            await table.remove([_field(a, r) for a in agent_ids for r in run_ids])
        elif agent_ids is not None:
            for agent_id in agent_ids:
                await table.remove_range(_BY_AGENT, _agent_span(agent_id, None))
        elif run_ids is not None:
            for run_id in run_ids:
                await table.remove_range(_BY_RUN, _run_span(run_id, None))
        else:
            await table.remove_range(_BY_TURN, Range.starting_with(b"", skip=INT_WIDTH))

    @redis_errors
    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        table = self._tables.of(tenant)
        if agent_ids is not None and run_ids is not None:
            # Both filters name rows outright: read them and order them here.
            fields = [_field(a, r) for a in agent_ids for r in run_ids]
            docs = [loads_document(raw) for raw in await table.get_many(fields) if raw is not None]
            return _merge([docs], after, limit)
        if agent_ids is not None:
            spans = [_agent_span(agent_id, after) for agent_id in agent_ids]
            pages = await table.read(_BY_AGENT, spans, limit=limit)
        elif run_ids is not None:
            spans = [_run_span(run_id, after) for run_id in run_ids]
            pages = await table.read(_BY_RUN, spans, limit=limit)
        else:
            span = Range.starting_with(b"", skip=INT_WIDTH)
            if after is not None:
                span = span.with_low(b"(" + _turn_member(after))
            pages = await table.read(_BY_TURN, [span], limit=limit)
        return _merge(
            [
                [loads_document(row.value) for row in page if row.value is not None]
                for page in pages
            ],
            after,
            limit,
        )

    @redis_errors
    async def tenants(self) -> builtins.list[str]:
        return await tenants_holding(self._client, self._root, "runs", ":docs")


def _turn_member(position: RunPosition) -> bytes:
    return sortable_int(position.turn_number) + _field(position.agent_id, position.run_id)


def _agent_span(agent_id: str, after: RunPosition | None) -> Range:
    """The runs of one agent after ``after`` in list order."""
    prefix = terminated(agent_id)
    span = Range.starting_with(prefix, skip=len(prefix) + INT_WIDTH, after=utf8(agent_id))
    if after is None:
        return span
    # Within one agent, order is (turnNumber, runId); the position's own
    # (turnNumber, runId) still follows it when this agent sorts after its agent.
    bound = prefix + sortable_int(after.turn_number) + terminated(after.run_id)
    inclusive = agent_id > after.agent_id
    return span.with_low((b"[" if inclusive else b"(") + bound)


def _run_span(run_id: str, after: RunPosition | None) -> Range:
    """The runs with this id after ``after`` in list order."""
    prefix = terminated(run_id)
    span = Range.starting_with(prefix, skip=len(prefix) + INT_WIDTH, before=prefix)
    if after is None:
        return span
    # Within one run id, order is (turnNumber, agentId).
    if run_id > after.run_id:
        low = b"[" + prefix + sortable_int(after.turn_number)
    elif run_id < after.run_id:
        low = b"[" + prefix + sortable_int(after.turn_number + 1)
    else:
        low = b"(" + prefix + sortable_int(after.turn_number) + utf8(after.agent_id)
    return span.with_low(low)


def _merge(pages: list[list[Document]], after: RunPosition | None, limit: int) -> list[Document]:
    """The first ``limit`` runs after ``after`` of several pages, in list order."""
    rows = [doc for page in pages for doc in page]
    if after is not None:
        rows = [doc for doc in rows if _order(run_position(doc)) > _order(after)]
    rows.sort(key=lambda doc: _order(run_position(doc)))
    return rows[:limit]
