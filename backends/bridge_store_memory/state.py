"""One tenant's in-memory substores: plain synchronous classes over sorted indexes.

Each method runs without awaiting, so it is atomic on the event loop. Every list
order is kept in sorted indexes (globally and per filter value), so a page is a binary
search and a slice, as on the other backends, not a sort of every row
(bench/scaling.py: a page of 100,000 agents took hundreds of milliseconds that way).

Documents are kept as JSON text, the encoding every other backend stores: orjson
parses one in C where the deep copy this replaced walked its parts in Python (178
bytecodes for each agent read back), and stored text is nobody else's object by
construction. Values JSON text cannot hold come back as the other backends give them
back (NaN as null). Beside each document, what its removal needs: its sort key and
the value it is filtered by.
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge_store.backend.substores import (
    AgentPosition,
    BlobRef,
    RunPosition,
    agent_position,
    duplicate_key,
    restorable,
    run_position,
    stored_event,
)
from bridge_store.errors import already_exists, not_found
from bridge_store.types import Document
from bridge_store.wire import jsontext

from .indexes import Grouped, Index

AgentKey = tuple[int, str]


def _agent_order(position: AgentPosition) -> AgentKey:
    return (position.updated_at, position.agent_id)


class Agents:
    def __init__(self) -> None:
        #: Each agent's document as JSON text, by id.
        self.rows: dict[str, bytes] = {}
        #: Each agent's sort key and cwd, by id.
        self._keys: dict[str, tuple[AgentKey, str]] = {}
        #: Who created each agent, beside its document (substores: "Who started it").
        self.creators: dict[str, str] = {}
        self._order: Index[AgentKey] = Index()
        self._by_cwd: Grouped[str, AgentKey] = Grouped()

    def _put(self, agent: Document) -> None:
        agent_id = agent["agentId"]
        if agent_id in self.rows:
            self._drop(agent_id)
        key = _agent_order(agent_position(agent))
        cwd = agent["cwd"]
        self.rows[agent_id] = jsontext.dumps_kept(agent)
        self._keys[agent_id] = (key, cwd)
        self._order.add(key)
        self._by_cwd.add(cwd, key)

    def _drop(self, agent_id: str) -> None:
        key, cwd = self._keys.pop(agent_id)
        del self.rows[agent_id]
        self._order.remove(key)
        self._by_cwd.remove(cwd, key)

    def get(self, agent_id: str) -> Document | None:
        row = self.rows.get(agent_id)
        return jsontext.loads_document(row) if row is not None else None

    def create(self, agent: Document, creator: str | None) -> Document:
        if agent["agentId"] in self.rows:
            raise already_exists(f"agent {agent['agentId']} already exists")
        self._put(agent)
        if creator is not None:
            self.creators[agent["agentId"]] = creator
        return agent

    def update(self, agent: Document) -> Document:
        if agent["agentId"] not in self.rows:
            raise not_found(f"agent {agent['agentId']} not found")
        self._put(agent)
        return agent

    def delete(self, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        if agent_ids is not None:
            doomed = [agent_id for agent_id in dict.fromkeys(agent_ids) if agent_id in self.rows]
        else:
            doomed = list(self.rows)
        for agent_id in doomed:
            if cwd is None or self._keys[agent_id][1] == cwd:
                self._drop(agent_id)
                self.creators.pop(agent_id, None)

    def list(self, *, cwd: str | None, after: AgentPosition | None, limit: int) -> list[Document]:
        # List order is descending: the indexes are read backwards.
        index = self._order if cwd is None else self._by_cwd.get(cwd)
        keys = index.before(None if after is None else _agent_order(after), limit)
        return [jsontext.loads_document(self.rows[agent_id]) for _, agent_id in keys]


RunKey = tuple[int, str, str]


def _run_order(position: RunPosition) -> RunKey:
    return (position.turn_number, position.run_id, position.agent_id)


class Runs:
    def __init__(self) -> None:
        #: Each run's document as JSON text, by (agent id, run id).
        self._rows: dict[tuple[str, str], bytes] = {}
        #: Each run's sort key, by (agent id, run id).
        self._keys: dict[tuple[str, str], RunKey] = {}
        self.creators: dict[tuple[str, str], str] = {}
        self._order: Index[RunKey] = Index()
        self._by_agent: Grouped[str, RunKey] = Grouped()
        self._by_run: Grouped[str, RunKey] = Grouped()

    def __len__(self) -> int:
        return len(self._rows)

    def _put(self, run: Document) -> None:
        ref = (run["agentId"], run["runId"])
        if ref in self._rows:
            self._drop(ref)
        key = _run_order(run_position(run))
        self._rows[ref] = jsontext.dumps_kept(run)
        self._keys[ref] = key
        self._order.add(key)
        self._by_agent.add(ref[0], key)
        self._by_run.add(ref[1], key)

    def _drop(self, ref: tuple[str, str]) -> None:
        key = self._keys.pop(ref)
        del self._rows[ref]
        self._order.remove(key)
        self._by_agent.remove(ref[0], key)
        self._by_run.remove(ref[1], key)

    def get(self, agent_id: str, run_id: str) -> Document | None:
        row = self._rows.get((agent_id, run_id))
        return jsontext.loads_document(row) if row is not None else None

    def create(self, run: Document, creator: str | None) -> Document:
        key = (run["agentId"], run["runId"])
        if key in self._rows:
            raise already_exists(f"run {run['runId']} of agent {run['agentId']} already exists")
        self._put(run)
        if creator is not None:
            self.creators[key] = creator
        return run

    def update(self, run: Document) -> Document:
        key = (run["agentId"], run["runId"])
        if key not in self._rows:
            raise not_found(f"run {run['runId']} of agent {run['agentId']} not found")
        self._put(run)
        return run

    def delete(self, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None) -> None:
        for agent_id, run_id in list(self._rows):
            if (agent_ids is None or agent_id in agent_ids) and (
                run_ids is None or run_id in run_ids
            ):
                self._drop((agent_id, run_id))
                self.creators.pop((agent_id, run_id), None)

    def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        run_ids: Sequence[str] | None,
        after: RunPosition | None,
        limit: int,
    ) -> list[Document]:
        start = None if after is None else _run_order(after)
        if run_ids is not None:
            # A run id names few runs (one per agent at most): filter those by agent.
            wanted = None if agent_ids is None else set(agent_ids)
            keys = [
                key
                for key in self._by_run.after(run_ids, start, len(self._rows))
                if wanted is None or key[2] in wanted
            ][:limit]
        elif agent_ids is not None:
            keys = self._by_agent.after(agent_ids, start, limit)
        else:
            keys = self._order.after(start, limit)
        return [
            jsontext.loads_document(self._rows[(agent_id, run_id)]) for _, run_id, agent_id in keys
        ]


class RunEvents:
    """Each run's events as JSON text (see the module's docstring), in seq order."""

    def __init__(self) -> None:
        self._logs: dict[str, list[bytes]] = {}
        self._by_key: dict[tuple[str, str], bytes] = {}

    def append(self, event: Document) -> Document:
        run_id, key = event["runId"], event["idempotencyKey"]
        if key is not None and (run_id, key) in self._by_key:
            return jsontext.loads_document(self._by_key[(run_id, key)])
        log = self._logs.setdefault(run_id, [])
        # The answer is built from the caller's own event, as runs and agents answer
        # with the document given, and as the SQL backends answer an append.
        answer = stored_event(event, len(log) + 1)
        stored = jsontext.dumps_kept(answer)
        log.append(stored)
        if key is not None:
            self._by_key[(run_id, key)] = stored
        return answer

    def restore(self, run_id: str, events: Sequence[Document]) -> int:
        log = self._logs.get(run_id, [])
        new = restorable(run_id, events, len(log))
        for event in new:
            key = event["idempotencyKey"]
            if key is not None and (run_id, key) in self._by_key:
                raise duplicate_key(run_id, key)
        for event in new:
            stored = jsontext.dumps_kept(event)
            self._logs.setdefault(run_id, []).append(stored)
            if event["idempotencyKey"] is not None:
                self._by_key[(run_id, event["idempotencyKey"])] = stored
        return len(new)

    def run_ids(self) -> list[str]:
        return sorted(self._logs)

    def list(self, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        # seq n sits at index n - 1, so the slice starts right after after_seq.
        log = self._logs.get(run_id, [])
        return [jsontext.loads_document(stored) for stored in log[after_seq : after_seq + limit]]

    def delete(self, run_ids: Sequence[str] | None) -> None:
        doomed = set(self._logs) if run_ids is None else set(run_ids)
        for run_id in doomed:
            self._logs.pop(run_id, None)
        self._by_key = {k: v for k, v in self._by_key.items() if k[0] not in doomed}


class Checkpoints:
    def __init__(self) -> None:
        self.blobs: dict[BlobRef, bytes] = {}
        self._order: Index[BlobRef] = Index()
        self._by_agent: Grouped[str, BlobRef] = Grouped()
        self._by_blob: Grouped[str, BlobRef] = Grouped()

    def get(self, agent_id: str, blob_id: str) -> bytes | None:
        return self.blobs.get(BlobRef(blob_id=blob_id, agent_id=agent_id))

    def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        ref = BlobRef(blob_id=blob_id, agent_id=agent_id)
        if ref in self.blobs:
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")
        self.blobs[ref] = data
        self._order.add(ref)
        self._by_agent.add(agent_id, ref)
        self._by_blob.add(blob_id, ref)

    def update(self, agent_id: str, blob_id: str, data: bytes) -> None:
        ref = BlobRef(blob_id=blob_id, agent_id=agent_id)
        if ref not in self.blobs:
            raise not_found(f"checkpoint blob {blob_id} of agent {agent_id} not found")
        self.blobs[ref] = data

    def delete(self, agent_ids: Sequence[str] | None, blob_ids: Sequence[str] | None) -> None:
        for ref in list(self.blobs):
            if (agent_ids is None or ref.agent_id in agent_ids) and (
                blob_ids is None or ref.blob_id in blob_ids
            ):
                del self.blobs[ref]
                self._order.remove(ref)
                self._by_agent.remove(ref.agent_id, ref)
                self._by_blob.remove(ref.blob_id, ref)

    def list(
        self,
        *,
        agent_ids: Sequence[str] | None,
        blob_ids: Sequence[str] | None,
        after: BlobRef | None,
        limit: int,
    ) -> list[BlobRef]:
        if blob_ids is not None:
            wanted = None if agent_ids is None else set(agent_ids)
            refs = [
                ref
                for ref in self._by_blob.after(blob_ids, after, len(self.blobs))
                if wanted is None or ref.agent_id in wanted
            ]
            return refs[:limit]
        if agent_ids is not None:
            return self._by_agent.after(agent_ids, after, limit)
        return self._order.after(after, limit)
