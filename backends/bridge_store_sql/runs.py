"""The runs substore."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bridge_store.backend.substores import RunPosition
from bridge_store.errors import already_exists, not_found
from bridge_store.types import Document
from bridge_store.wire import jsontext

from . import keyset
from .engine import Database
from .filters import one_of, tenants_of
from .statements import Session
from .summary import SUMMARY_COLUMNS, summary_columns
from .tables import runs as t
from .upsert import insert_if_absent


def _row(tenant: str, run: Document) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "agent_id": run["agentId"],
        "run_id": run["runId"],
        "turn_number": run["turnNumber"],
        "doc": jsontext.dumps_text(run),
        # Revision 0005: what the history's run list and overview read, beside the doc.
        **summary_columns(run),
    }


def _matching(
    tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
) -> list[sa.ColumnElement[bool]]:
    conditions: list[sa.ColumnElement[bool]] = [t.c.tenant == tenant]
    if agent_ids is not None:
        conditions.append(one_of(t.c.agent_id, agent_ids))
    if run_ids is not None:
        conditions.append(one_of(t.c.run_id, run_ids))
    return conditions


#: The list order, and where a list page's cursor binds.
_ORDER = (t.c.turn_number, t.c.run_id, t.c.agent_id)
_AFTER = ("b_after_turn_number", "b_after_run_id", "b_after_agent_id")
#: Id filters of one to this many ids get a statement built once per length (the bridge
#: lists the runs of one agent); longer and empty ones are built per call.
SHAPED_IDS_LIMIT = 8


@functools.cache
def _list_statement(
    agent_ids: int | None, run_ids: int | None, paged: bool
) -> sa.Select[tuple[str]]:
    """The list statement of one shape (how many ids each filter has, whether paged),
    built once (see agents.py): at most 2 x 9 x 9 of them."""
    conditions = [t.c.tenant == sa.bindparam("b_tenant")]
    if agent_ids is not None:
        conditions.append(t.c.agent_id.in_(_id_params(t.c.agent_id, "b_agent", agent_ids)))
    if run_ids is not None:
        conditions.append(t.c.run_id.in_(_id_params(t.c.run_id, "b_run", run_ids)))
    query = sa.select(t.c.doc).where(*conditions)
    if paged:
        query = query.where(keyset.after_bound(_ORDER, _AFTER))
    return query.order_by(*_ORDER).limit(sa.bindparam("b_limit", type_=sa.BigInteger()))


def _id_params(column: sa.Column[str], prefix: str, count: int) -> list[sa.BindParameter[str]]:
    # Typed like the column, as the other parameters are by their comparisons.
    return [sa.bindparam(f"{prefix}_{index}", type_=column.type) for index in range(count)]


def list_statement(
    tenant: str,
    *,
    agent_ids: Sequence[str] | None,
    run_ids: Sequence[str] | None,
    after: RunPosition | None,
    limit: int,
) -> tuple[sa.Select[tuple[str]], dict[str, Any] | None]:
    """Runs in (turn_number, run_id, agent_id) order: the statement and its parameters.

    Unfiltered, by one agent or by one run id, an index holds the rows in list order
    (see tables.py), so a page reads ``limit`` index entries wherever the cursor is.
    """
    if any(
        ids is not None and not 0 < len(ids) <= SHAPED_IDS_LIMIT for ids in (agent_ids, run_ids)
    ):
        return _list_built(tenant, agent_ids, run_ids, after, limit), None
    params: dict[str, Any] = {"b_tenant": tenant, "b_limit": limit}
    for prefix, ids in (("b_agent", agent_ids), ("b_run", run_ids)):
        params.update((f"{prefix}_{index}", value) for index, value in enumerate(ids or ()))
    if after is not None:
        params.update(zip(_AFTER, (after.turn_number, after.run_id, after.agent_id), strict=True))
    shape = _list_statement(
        None if agent_ids is None else len(agent_ids),
        None if run_ids is None else len(run_ids),
        after is not None,
    )
    return shape, params


def _list_built(
    tenant: str,
    agent_ids: Sequence[str] | None,
    run_ids: Sequence[str] | None,
    after: RunPosition | None,
    limit: int,
) -> sa.Select[tuple[str]]:
    """The list statement with its values in it, built for one call: long id filters."""
    query = sa.select(t.c.doc).where(*_matching(tenant, agent_ids, run_ids))
    if after is not None:
        query = query.where(keyset.after(_ORDER, (after.turn_number, after.run_id, after.agent_id)))
    return query.order_by(*_ORDER).limit(limit)


def list_query(
    tenant: str,
    *,
    agent_ids: Sequence[str] | None,
    run_ids: Sequence[str] | None,
    after: RunPosition | None,
    limit: int,
) -> sa.Select[tuple[str]]:
    """The list statement with its parameters bound (for EXPLAIN in the plan tests)."""
    statement, params = list_statement(
        tenant, agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
    )
    return statement if params is None else statement.params(**params)


# Built once with bound parameters (see agents.py).
_KEY = (
    t.c.tenant == sa.bindparam("b_tenant"),
    t.c.agent_id == sa.bindparam("b_agent_id"),
    t.c.run_id == sa.bindparam("b_run_id"),
)
_GET = sa.select(t.c.doc).where(*_KEY)
_UPDATE = (
    sa.update(t)
    .where(*_KEY)
    .values(
        turn_number=sa.bindparam("b_turn_number"),
        doc=sa.bindparam("b_doc"),
        **{column: sa.bindparam(f"b_{column}") for column in SUMMARY_COLUMNS},
    )
)


class SqlRuns:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, tenant: str, agent_id: str, run_id: str) -> Document | None:
        params = {"b_tenant": tenant, "b_agent_id": agent_id, "b_run_id": run_id}

        def work(conn: Session) -> str | None:
            text: str | None = conn.scalar(_GET, params)
            return text

        text = await self._db.read(work, what="runs.get")
        return jsontext.loads_document(text) if text is not None else None

    async def create(self, tenant: str, run: Document, creator: str | None = None) -> Document:
        row = {**_row(tenant, run), "created_by": creator}

        def work(conn: Session) -> bool:
            return insert_if_absent(conn, t, row)

        if not await self._db.write(
            work, what="runs.create", atomic=False, retry=False, doc_bytes=len(row["doc"])
        ):
            raise already_exists(f"run {run['runId']} of agent {run['agentId']} already exists")
        return run

    async def update(self, tenant: str, run: Document) -> Document:
        params = {f"b_{column}": value for column, value in _row(tenant, run).items()}

        def work(conn: Session) -> int:
            return conn.execute(_UPDATE, params).rowcount

        if not await self._db.write(
            work, what="runs.update", atomic=False, retry=True, doc_bytes=len(params["b_doc"])
        ):
            raise not_found(f"run {run['runId']} of agent {run['agentId']} not found")
        return run

    async def delete(
        self, tenant: str, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None
    ) -> None:
        statement = sa.delete(t).where(*_matching(tenant, agent_ids, run_ids))

        def work(conn: Session) -> None:
            conn.execute(statement)

        await self._db.write(work, what="runs.delete", atomic=False, retry=True)

    async def list(
        self,
        tenant: str,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        statement, params = list_statement(
            tenant, agent_ids=agent_ids, run_ids=run_ids, after=after, limit=limit
        )

        def work(conn: Session) -> list[str]:
            return list(conn.scalars(statement, params))

        return [
            jsontext.loads_document(text) for text in await self._db.read(work, what="runs.list")
        ]

    async def creators(
        self, tenant: str, runs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        if not runs:
            return {}
        wanted = set(runs)
        agent_ids = sorted({agent_id for agent_id, _ in wanted})
        run_ids = sorted({run_id for _, run_id in wanted})
        query = sa.select(t.c.agent_id, t.c.run_id, t.c.created_by).where(
            *_matching(tenant, agent_ids, run_ids), t.c.created_by.is_not(None)
        )

        def work(conn: Session) -> dict[tuple[str, str], str]:
            return {(row[0], row[1]): row[2] for row in conn.execute(query)}

        found = await self._db.read(work, what="runs.creators")
        # The two id filters name every pair of their ids: keep the pairs asked for.
        return {key: name for key, name in found.items() if key in wanted}

    async def tenants(self) -> builtins.list[str]:
        return await self._db.read(tenants_of(t), what="runs.tenants")
