"""Dict-backed substores. Each method runs without awaiting, so it is atomic on the loop."""

from __future__ import annotations

from collections.abc import Sequence

from bridge_store.contract import agent_position, run_position, stored_event
from bridge_store.errors import already_exists, not_found
from bridge_store.substores import AgentPosition, BlobRef, RunPosition
from bridge_store.types import Document, copy_json


def _agent_order(position: AgentPosition) -> tuple[int, str]:
    return (position.updated_at, position.agent_id)


class MemoryAgents:
    def __init__(self) -> None:
        self._rows: dict[str, Document] = {}

    async def get(self, agent_id: str) -> Document | None:
        row = self._rows.get(agent_id)
        return copy_json(row) if row is not None else None

    async def create(self, agent: Document) -> Document:
        if agent["agentId"] in self._rows:
            raise already_exists(f"agent {agent['agentId']} already exists")
        self._rows[agent["agentId"]] = copy_json(agent)
        return agent

    async def update(self, agent: Document) -> Document:
        if agent["agentId"] not in self._rows:
            raise not_found(f"agent {agent['agentId']} not found")
        self._rows[agent["agentId"]] = copy_json(agent)
        return agent

    async def delete(self, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        for agent_id, row in list(self._rows.items()):
            if (agent_ids is None or agent_id in agent_ids) and (cwd is None or row["cwd"] == cwd):
                del self._rows[agent_id]

    async def list(
        self, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        rows = [row for row in self._rows.values() if cwd is None or row["cwd"] == cwd]
        if after is not None:
            rows = [row for row in rows if _agent_order(agent_position(row)) < _agent_order(after)]
        rows.sort(key=lambda row: _agent_order(agent_position(row)), reverse=True)
        return copy_json(rows[:limit])


def _run_order(position: RunPosition) -> tuple[int, str, str]:
    return (position.turn_number, position.run_id, position.agent_id)


class MemoryRuns:
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Document] = {}

    async def get(self, agent_id: str, run_id: str) -> Document | None:
        row = self._rows.get((agent_id, run_id))
        return copy_json(row) if row is not None else None

    async def create(self, run: Document) -> Document:
        key = (run["agentId"], run["runId"])
        if key in self._rows:
            raise already_exists(f"run {run['runId']} of agent {run['agentId']} already exists")
        self._rows[key] = copy_json(run)
        return run

    async def update(self, run: Document) -> Document:
        key = (run["agentId"], run["runId"])
        if key not in self._rows:
            raise not_found(f"run {run['runId']} of agent {run['agentId']} not found")
        self._rows[key] = copy_json(run)
        return run

    async def delete(self, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None) -> None:
        for agent_id, run_id in list(self._rows):
            if (agent_ids is None or agent_id in agent_ids) and (
                run_ids is None or run_id in run_ids
            ):
                del self._rows[(agent_id, run_id)]

    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        rows = [
            row
            for (agent_id, run_id), row in self._rows.items()
            if (agent_ids is None or agent_id in agent_ids)
            and (run_ids is None or run_id in run_ids)
            and (after is None or _run_order(run_position(row)) > _run_order(after))
        ]
        rows.sort(key=lambda row: _run_order(run_position(row)))
        return copy_json(rows[:limit])


class MemoryRunEvents:
    def __init__(self) -> None:
        self._logs: dict[str, list[Document]] = {}
        self._by_key: dict[tuple[str, str], Document] = {}

    async def append(self, event: Document) -> Document:
        run_id, key = event["runId"], event["idempotencyKey"]
        if key is not None and (run_id, key) in self._by_key:
            return copy_json(self._by_key[(run_id, key)])
        log = self._logs.setdefault(run_id, [])
        stored = stored_event(copy_json(event), len(log) + 1)
        log.append(stored)
        if key is not None:
            self._by_key[(run_id, key)] = stored
        return copy_json(stored)

    async def list(self, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        # seq n sits at index n - 1, so the slice starts right after after_seq.
        log = self._logs.get(run_id, [])
        return copy_json(log[after_seq : after_seq + limit])

    async def delete(self, run_ids: Sequence[str] | None) -> None:
        doomed = set(self._logs) if run_ids is None else set(run_ids)
        for run_id in doomed:
            self._logs.pop(run_id, None)
        self._by_key = {k: v for k, v in self._by_key.items() if k[0] not in doomed}


class MemoryCheckpoints:
    def __init__(self) -> None:
        self._blobs: dict[BlobRef, bytes] = {}

    async def get(self, agent_id: str, blob_id: str) -> bytes | None:
        return self._blobs.get(BlobRef(blob_id=blob_id, agent_id=agent_id))

    async def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        ref = BlobRef(blob_id=blob_id, agent_id=agent_id)
        if ref in self._blobs:
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")
        self._blobs[ref] = data

    async def update(self, agent_id: str, blob_id: str, data: bytes) -> None:
        ref = BlobRef(blob_id=blob_id, agent_id=agent_id)
        if ref not in self._blobs:
            raise not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")
        self._blobs[ref] = data

    async def delete(self, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None) -> None:
        for ref in list(self._blobs):
            if (agent_ids is None or ref.agent_id in agent_ids) and (
                blob_ids is None or ref.blob_id in blob_ids
            ):
                del self._blobs[ref]

    async def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        refs = sorted(
            ref
            for ref in self._blobs
            if (agent_ids is None or ref.agent_id in agent_ids)
            and (blob_ids is None or ref.blob_id in blob_ids)
            and (after is None or ref > after)
        )
        return refs[:limit]


class MemoryBackend:
    def __init__(self) -> None:
        self.agents = MemoryAgents()
        self.runs = MemoryRuns()
        self.run_events = MemoryRunEvents()
        self.checkpoints = MemoryCheckpoints()

    async def start(self, *, migrate: bool) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release."""

    async def upgrade_schema(self) -> None:
        """No schema."""

    async def schema_revision(self) -> str | None:
        return None
