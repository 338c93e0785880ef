"""The agents substore."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.substores import AgentPosition
from bridge_store.errors import already_exists, not_found
from bridge_store.types import Document
from bridge_store.wire import jsontext

from . import keyset
from .engine import Database
from .filters import one_of, tenants_of
from .statements import Session
from .tables import agents as t
from .upsert import insert_if_absent


def _row(tenant: str, agent: Document) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "agent_id": agent["agentId"],
        "cwd": agent["cwd"],
        "updated_at": agent["updatedAt"],
        "doc": jsontext.dumps_text(agent),
    }


def _matching(
    tenant: str, agent_ids: Sequence[str] | None, cwd: str | None
) -> list[sa.ColumnElement[bool]]:
    conditions: list[sa.ColumnElement[bool]] = [t.c.tenant == tenant]
    if agent_ids is not None:
        conditions.append(one_of(t.c.agent_id, agent_ids))
    if cwd is not None:
        conditions.append(t.c.cwd == cwd)
    return conditions


#: Where a list page's cursor binds.
_AFTER = ("b_after_updated_at", "b_after_agent_id")


@functools.cache
def _list_statement(by_cwd: bool, paged: bool) -> sa.Select[tuple[str]]:
    """The list statement of one shape, built once (see ``_GET`` below): four in all."""
    conditions = [t.c.tenant == sa.bindparam("b_tenant")]
    if by_cwd:
        conditions.append(t.c.cwd == sa.bindparam("b_cwd"))
    query = sa.select(t.c.doc).where(*conditions)
    if paged:
        query = query.where(
            keyset.after_bound((t.c.updated_at, t.c.agent_id), _AFTER, descending=True)
        )
    return query.order_by(t.c.updated_at.desc(), t.c.agent_id.desc()).limit(
        sa.bindparam("b_limit", type_=sa.BigInteger())
    )


def list_statement(
    tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
) -> tuple[sa.Select[tuple[str]], dict[str, Any]]:
    """Newest first; with ``cwd`` the (tenant, cwd, updated_at, agent_id) index serves it.

    The statement (one of four, built once) and its parameters.
    """
    params: dict[str, Any] = {"b_tenant": tenant, "b_limit": limit}
    if cwd is not None:
        params["b_cwd"] = cwd
    if after is not None:
        params.update(zip(_AFTER, (after.updated_at, after.agent_id), strict=True))
    return _list_statement(cwd is not None, after is not None), params


def list_query(
    tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
) -> sa.Select[tuple[str]]:
    """The list statement with its parameters bound (for EXPLAIN in the plan tests)."""
    statement, params = list_statement(tenant, cwd=cwd, after=after, limit=limit)
    return statement.params(**params)


# Built once with bound parameters: constructing a statement per call and computing
# its cache key cost about three times the statement's own execution on SQLite.
_GET = sa.select(t.c.doc).where(
    t.c.tenant == sa.bindparam("b_tenant"), t.c.agent_id == sa.bindparam("b_agent_id")
)
_UPDATE = (
    sa.update(t)
    .where(t.c.tenant == sa.bindparam("b_tenant"), t.c.agent_id == sa.bindparam("b_agent_id"))
    .values(
        cwd=sa.bindparam("b_cwd"),
        updated_at=sa.bindparam("b_updated_at"),
        doc=sa.bindparam("b_doc"),
    )
)


class SqlAgents:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, tenant: str, agent_id: str) -> Document | None:
        def work(conn: Session) -> str | None:
            text: str | None = conn.scalar(_GET, {"b_tenant": tenant, "b_agent_id": agent_id})
            return text

        text = await self._db.read(work, what="agents.get")
        return jsontext.loads_document(text) if text is not None else None

    async def create(self, tenant: str, agent: Document, creator: str | None = None) -> Document:
        row = {**_row(tenant, agent), "created_by": creator}

        def work(conn: Session) -> bool:
            return insert_if_absent(conn, t, row)

        if not await self._db.write(
            work, what="agents.create", atomic=False, retry=False, doc_bytes=len(row["doc"])
        ):
            raise already_exists(f"agent {agent['agentId']} already exists")
        return agent

    async def update(self, tenant: str, agent: Document) -> Document:
        params = {f"b_{column}": value for column, value in _row(tenant, agent).items()}

        def work(conn: Session) -> int:
            return conn.execute(_UPDATE, params).rowcount

        if not await self._db.write(
            work, what="agents.update", atomic=False, retry=True, doc_bytes=len(params["b_doc"])
        ):
            raise not_found(f"agent {agent['agentId']} not found")
        return agent

    async def delete(self, tenant: str, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        def work(conn: Session) -> None:
            conn.execute(sa.delete(t).where(*_matching(tenant, agent_ids, cwd)))

        await self._db.write(work, what="agents.delete", atomic=False, retry=True)

    async def list(
        self, tenant: str, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        statement, params = list_statement(tenant, cwd=cwd, after=after, limit=limit)

        def work(conn: Session) -> list[str]:
            return list(conn.scalars(statement, params))

        return [
            jsontext.loads_document(text) for text in await self._db.read(work, what="agents.list")
        ]

    async def creators(self, tenant: str, agent_ids: Sequence[str]) -> dict[str, str]:
        query = sa.select(t.c.agent_id, t.c.created_by).where(
            *_matching(tenant, agent_ids, None), t.c.created_by.is_not(None)
        )

        def work(conn: Session) -> dict[str, str]:
            return {row[0]: row[1] for row in conn.execute(query)}

        return await self._db.read(work, what="agents.creators") if agent_ids else {}

    async def tenants(self) -> builtins.list[str]:
        return await self._db.read(tenants_of(t), what="agents.tenants")
