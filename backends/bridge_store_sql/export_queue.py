"""The export queue (``features.ExportQueue``): one row per run waiting, revision 0012.

Queuing is an upsert that replaces the row's time, so a run queued again keeps one
row; unqueuing deletes a row only while it holds the time that was taken, so a run
queued again after it was taken stays. The oldest come first through the table's
``(queued_ms, tenant, agent_id, run_id)`` index.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from bridge_store.backend.features import QueuedRun

from .engine import Database
from .statements import Session
from .tables import run_export_queue as t

_KEY = ("tenant", "agent_id", "run_id")
_TAKE = (
    sa.select(t.c.queued_ms, t.c.tenant, t.c.agent_id, t.c.run_id)
    .order_by(t.c.queued_ms, t.c.tenant, t.c.agent_id, t.c.run_id)
    .limit(sa.bindparam("b_limit"))
)
_REMOVE = sa.delete(t).where(
    t.c.tenant == sa.bindparam("b_tenant"),
    t.c.agent_id == sa.bindparam("b_agent_id"),
    t.c.run_id == sa.bindparam("b_run_id"),
    t.c.queued_ms == sa.bindparam("b_queued_ms"),
)
_COUNT = sa.select(sa.func.count()).select_from(t)


@functools.cache
def _upsert(dialect: str) -> Any:
    insert = postgresql.insert(t) if dialect == "postgresql" else sqlite.insert(t)
    return insert.on_conflict_do_update(
        index_elements=list(_KEY), set_={"queued_ms": insert.excluded.queued_ms}
    )


def _row(run: QueuedRun) -> dict[str, Any]:
    return {
        "tenant": run.tenant,
        "agent_id": run.agent_id,
        "run_id": run.run_id,
        "queued_ms": run.queued_ms,
    }


class SqlExportQueue:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        if not runs:
            return
        rows = [_row(run) for run in runs]

        def work(conn: Session) -> None:
            statement = _upsert(conn.dialect.name)
            for row in rows:
                conn.execute(statement, row)

        # The same rows again change nothing: safe to repeat on a dead connection.
        await self._db.write(work, what="export queue: queue", atomic=True, retry=True)

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        def work(conn: Session) -> list[QueuedRun]:
            return [QueuedRun(*row) for row in conn.execute(_TAKE, {"b_limit": limit})]

        return await self._db.read(work, what="export queue: read")

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        if not runs:
            return
        params = [
            {
                "b_tenant": run.tenant,
                "b_agent_id": run.agent_id,
                "b_run_id": run.run_id,
                "b_queued_ms": run.queued_ms,
            }
            for run in runs
        ]

        def work(conn: Session) -> None:
            for one in params:
                conn.execute(_REMOVE, one)

        await self._db.write(work, what="export queue: unqueue", atomic=True, retry=True)

    async def queued_count(self) -> int:
        def work(conn: Session) -> int:
            return int(conn.scalar(_COUNT))

        return await self._db.read(work, what="export queue: count")
