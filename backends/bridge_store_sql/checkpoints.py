"""The checkpoints substore: content-addressed blobs per agent.

Blobs are bytes in a binary column (``bytea`` / SQLite BLOB): the bytes the contract
layer decoded go to the driver as they are and come back as one ``bytes`` object, with
no base64 or hex round in between.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import sqlalchemy as sa

from bridge_store.backend.substores import BlobRef
from bridge_store.errors import already_exists, not_found

from . import keyset
from .blob_reads import read_blob
from .engine import Database
from .filters import one_of, tenants_of
from .statements import Session
from .tables import checkpoint_blobs as t
from .upsert import insert_if_absent


def _matching(
    tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
) -> list[sa.ColumnElement[bool]]:
    conditions: list[sa.ColumnElement[bool]] = [t.c.tenant == tenant]
    if agent_ids is not None:
        conditions.append(one_of(t.c.agent_id, agent_ids))
    if blob_ids is not None:
        conditions.append(one_of(t.c.blob_id, blob_ids))
    return conditions


def list_query(
    tenant: str,
    *,
    agent_ids: Sequence[str] | None,
    blob_ids: Sequence[str] | None,
    after: BlobRef | None,
    limit: int,
) -> sa.Select[tuple[str, str]]:
    """Blob refs in (blob_id, agent_id) order; by one agent the primary key serves it."""
    query = sa.select(t.c.blob_id, t.c.agent_id).where(*_matching(tenant, agent_ids, blob_ids))
    if after is not None:
        query = query.where(
            keyset.after((t.c.blob_id, t.c.agent_id), (after.blob_id, after.agent_id))
        )
    return query.order_by(t.c.blob_id, t.c.agent_id).limit(limit)


# Built once with bound parameters (see agents.py).
_KEY = (
    t.c.tenant == sa.bindparam("b_tenant"),
    t.c.agent_id == sa.bindparam("b_agent_id"),
    t.c.blob_id == sa.bindparam("b_blob_id"),
)
_UPDATE = sa.update(t).where(*_KEY).values(data=sa.bindparam("b_data"))


class SqlCheckpoints:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, tenant: str, agent_id: str, blob_id: str) -> bytes | None:
        params = {"b_tenant": tenant, "b_agent_id": agent_id, "b_blob_id": blob_id}

        def work(conn: Session) -> bytes | None:
            return read_blob(conn, params)  # a large one in pieces (blob_reads.py)

        return await self._db.read(work, what="checkpoints.get")

    async def create(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        row = {"tenant": tenant, "agent_id": agent_id, "blob_id": blob_id, "data": data}

        def work(conn: Session) -> bool:
            return insert_if_absent(conn, t, row)

        if not await self._db.write(work, what="checkpoints.create", atomic=False, retry=False):
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")

    async def update(self, tenant: str, agent_id: str, blob_id: str, data: bytes) -> None:
        params = {"b_tenant": tenant, "b_agent_id": agent_id, "b_blob_id": blob_id, "b_data": data}

        def work(conn: Session) -> int:
            return (conn.execute(_UPDATE, params)).rowcount

        if not await self._db.write(work, what="checkpoints.update", atomic=False, retry=True):
            raise not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None
    ) -> None:
        statement = sa.delete(t).where(*_matching(tenant, agent_ids, blob_ids))

        def work(conn: Session) -> None:
            conn.execute(statement)

        await self._db.write(work, what="checkpoints.delete", atomic=False, retry=True)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        query = list_query(tenant, agent_ids=agent_ids, blob_ids=blob_ids, after=after, limit=limit)

        def work(conn: Session) -> list[BlobRef]:
            rows = conn.execute(query)
            return [BlobRef(blob_id=row[0], agent_id=row[1]) for row in rows]

        return await self._db.read(work, what="checkpoints.list")

    async def tenants(self) -> builtins.list[str]:
        return await self._db.read(tenants_of(t), what="checkpoints.tenants")
