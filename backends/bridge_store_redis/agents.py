"""Agents: one hash of documents, indexed by (updatedAt, agentId) globally and per cwd.

Index members (score 0, compared as bytes; see :mod:`bridge_store_redis.keys`):

- ``by-updated``: ``int(updatedAt) + agentId``;
- ``by-cwd``: ``terminated(cwd) + int(updatedAt) + agentId``, so one cwd is one
  contiguous range of a single key (no key per cwd, which a script would have to
  name from data it reads).

Listing reads either index backwards (``ZRANGE ... BYLEX REV``): descending bytes is
(updatedAt desc, agentId desc), the contract's order.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Literal

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.substores import AgentPosition
from bridge_store.errors import already_exists, not_found
from bridge_store.types import Document
from bridge_store.wire.jsontext import dumps, loads_document

from ._rows import Range, RowTable, Tenants, tenants_holding
from .errors import redis_errors
from .keys import INT_WIDTH, TOP, KeySpace, from_utf8, sortable_int, terminated, utf8
from .scripts import Scripts

_BY_UPDATED, _BY_CWD = 1, 2


def _order_member(updated_at: int, agent_id: str) -> bytes:
    return sortable_int(updated_at) + utf8(agent_id)


class RedisAgents:
    def __init__(self, client: Redis | RedisCluster, keys: KeySpace, scripts: Scripts) -> None:
        self._client = client
        self._keys = keys
        self._tables = Tenants(
            lambda tenant: RowTable(
                client, keys.of_tenant(tenant).table("agents", ("updated", "cwd")), scripts
            )
        )

    @redis_errors
    async def get(self, tenant: str, agent_id: str) -> Document | None:
        raw = await self._tables.of(tenant).get(utf8(agent_id))
        return loads_document(raw) if raw is not None else None

    @redis_errors
    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        if not await self._put(tenant, "create", agent, creator):
            raise already_exists(f"agent {agent['agentId']} already exists")
        return agent

    @redis_errors
    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        names = await self._tables.of(tenant).creators([utf8(a) for a in agent_ids])
        return {a: from_utf8(n) for a, n in zip(agent_ids, names, strict=True) if n is not None}

    @redis_errors
    async def update(self, tenant: str, agent: Document) -> Document:
        if not await self._put(tenant, "update", agent):
            raise not_found(f"agent {agent['agentId']} not found")
        return agent

    async def _put(
        self,
        tenant: str,
        mode: Literal["create", "update"],
        agent: Document,
        creator: str | None = None,
    ) -> bool:
        order = _order_member(agent["updatedAt"], agent["agentId"])
        members = [order, terminated(agent["cwd"]) + order]
        return await self._tables.of(tenant).put(
            mode, utf8(agent["agentId"]), dumps(agent), members, creator
        )

    @redis_errors
    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        table = self._tables.of(tenant)
        if agent_ids is not None:
            # The cwd is checked inside the delete script, against the stored row.
            check = None if cwd is None else (_BY_CWD, terminated(cwd))
            await table.remove([utf8(agent_id) for agent_id in agent_ids], check=check)
        elif cwd is not None:
            prefix = terminated(cwd)
            await table.remove_range(
                _BY_CWD, Range.starting_with(prefix, skip=len(prefix) + INT_WIDTH)
            )
        else:
            await table.remove_range(_BY_UPDATED, Range.starting_with(b"", skip=INT_WIDTH))

    @redis_errors
    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        index, prefix = (_BY_UPDATED, b"") if cwd is None else (_BY_CWD, terminated(cwd))
        high = (
            b"[" + prefix + TOP
            if after is None
            else b"(" + prefix + _order_member(after.updated_at, after.agent_id)
        )
        span = Range(low=b"[" + prefix, high=high, skip=len(prefix) + INT_WIDTH)
        [rows] = await self._tables.of(tenant).read(index, [span], limit=limit, reverse=True)
        return [loads_document(row.value) for row in rows if row.value is not None]

    @redis_errors
    async def tenants(self) -> builtins.list[str]:
        return await tenants_holding(self._client, self._keys, "agents", ":docs")
