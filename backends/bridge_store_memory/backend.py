"""Dict-backed substores. Each method runs without awaiting, so it is atomic on the loop.

Every list order is kept in sorted indexes (globally and per filter value), so a page
is a binary search and a slice, as on the other backends, not a sort of every row
(bench/scaling.py: a page of 100,000 agents took hundreds of milliseconds that way).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar, cast

from bridge_store.errors import already_exists, not_found
from bridge_store.substores import (
    AgentPosition,
    BlobRef,
    RunPosition,
    agent_position,
    run_position,
    stored_event,
)
from bridge_store.types import Document

K = TypeVar("K", bound=tuple[object, ...] | BlobRef)
G = TypeVar("G", bound=Hashable)
_JSON = TypeVar("_JSON")


def copy_json(value: _JSON) -> _JSON:
    """A deep copy of a JSON value (dicts, lists, scalars).

    About five times faster than ``copy.deepcopy``, which tracks shared references and
    dispatches on every type; JSON values have neither cycles nor shared parts worth
    keeping.
    """
    if isinstance(value, dict):
        return cast(_JSON, {key: copy_json(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_JSON, [copy_json(item) for item in value])
    return value  # str, int, float, bool, None: immutable


class _Index(Generic[K]):
    """Sort keys in ascending order, one per row."""

    def __init__(self) -> None:
        self._keys: list[K] = []

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: K) -> None:
        bisect.insort(self._keys, key)

    def remove(self, key: K) -> None:
        at = bisect.bisect_left(self._keys, key)
        if at < len(self._keys) and self._keys[at] == key:
            del self._keys[at]

    def after(self, key: K | None, limit: int) -> list[K]:
        """Up to ``limit`` keys strictly after ``key``, ascending."""
        start = 0 if key is None else bisect.bisect_right(self._keys, key)
        return self._keys[start : start + limit]

    def before(self, key: K | None, limit: int) -> list[K]:
        """Up to ``limit`` keys strictly before ``key``, descending."""
        stop = len(self._keys) if key is None else bisect.bisect_left(self._keys, key)
        return self._keys[max(0, stop - limit) : stop][::-1]


class _Grouped(Generic[G, K]):
    """One index per group (a cwd, an agent id ...), dropped when it empties."""

    def __init__(self) -> None:
        self._groups: dict[G, _Index[K]] = {}

    def add(self, group: G, key: K) -> None:
        self._groups.setdefault(group, _Index()).add(key)

    def remove(self, group: G, key: K) -> None:
        index = self._groups.get(group)
        if index is not None:
            index.remove(key)
            if not len(index):
                del self._groups[group]

    def get(self, group: G) -> _Index[K]:
        return self._groups.get(group) or _Index()

    def after(self, groups: Iterable[G], key: K | None, limit: int) -> list[K]:
        """The first ``limit`` keys after ``key`` of several groups, ascending."""
        pages = [self.get(group).after(key, limit) for group in dict.fromkeys(groups)]
        merged: Iterator[K] = heapq.merge(*pages)
        return list(itertools.islice(merged, limit))


AgentKey = tuple[int, str]


def _agent_order(position: AgentPosition) -> AgentKey:
    return (position.updated_at, position.agent_id)


class MemoryAgents:
    def __init__(self) -> None:
        self._rows: dict[str, Document] = {}
        self._order: _Index[AgentKey] = _Index()
        self._by_cwd: _Grouped[str, AgentKey] = _Grouped()

    def _put(self, agent: Document) -> None:
        old = self._rows.get(agent["agentId"])
        if old is not None:
            self._drop(old)
        row = copy_json(agent)
        key = _agent_order(agent_position(row))
        self._rows[row["agentId"]] = row
        self._order.add(key)
        self._by_cwd.add(row["cwd"], key)

    def _drop(self, row: Document) -> None:
        key = _agent_order(agent_position(row))
        del self._rows[row["agentId"]]
        self._order.remove(key)
        self._by_cwd.remove(row["cwd"], key)

    async def get(self, agent_id: str) -> Document | None:
        row = self._rows.get(agent_id)
        return copy_json(row) if row is not None else None

    async def create(self, agent: Document) -> Document:
        if agent["agentId"] in self._rows:
            raise already_exists(f"agent {agent['agentId']} already exists")
        self._put(agent)
        return agent

    async def update(self, agent: Document) -> Document:
        if agent["agentId"] not in self._rows:
            raise not_found(f"agent {agent['agentId']} not found")
        self._put(agent)
        return agent

    async def delete(self, agent_ids: Sequence[str] | None, cwd: str | None) -> None:
        if agent_ids is not None:
            found = (self._rows.get(agent_id) for agent_id in dict.fromkeys(agent_ids))
            doomed = [row for row in found if row is not None]
        else:
            doomed = list(self._rows.values())
        for row in doomed:
            if cwd is None or row["cwd"] == cwd:
                self._drop(row)

    async def list(
        self, *, cwd: str | None, after: AgentPosition | None, limit: int
    ) -> list[Document]:
        # List order is descending: the indexes are read backwards.
        index = self._order if cwd is None else self._by_cwd.get(cwd)
        keys = index.before(None if after is None else _agent_order(after), limit)
        return [copy_json(self._rows[agent_id]) for _, agent_id in keys]


RunKey = tuple[int, str, str]


def _run_order(position: RunPosition) -> RunKey:
    return (position.turn_number, position.run_id, position.agent_id)


class MemoryRuns:
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Document] = {}
        self._order: _Index[RunKey] = _Index()
        self._by_agent: _Grouped[str, RunKey] = _Grouped()
        self._by_run: _Grouped[str, RunKey] = _Grouped()

    def _put(self, run: Document) -> None:
        ref = (run["agentId"], run["runId"])
        old = self._rows.get(ref)
        if old is not None:
            self._drop(old)
        row = copy_json(run)
        key = _run_order(run_position(row))
        self._rows[ref] = row
        self._order.add(key)
        self._by_agent.add(ref[0], key)
        self._by_run.add(ref[1], key)

    def _drop(self, row: Document) -> None:
        key = _run_order(run_position(row))
        del self._rows[(row["agentId"], row["runId"])]
        self._order.remove(key)
        self._by_agent.remove(row["agentId"], key)
        self._by_run.remove(row["runId"], key)

    async def get(self, agent_id: str, run_id: str) -> Document | None:
        row = self._rows.get((agent_id, run_id))
        return copy_json(row) if row is not None else None

    async def create(self, run: Document) -> Document:
        key = (run["agentId"], run["runId"])
        if key in self._rows:
            raise already_exists(f"run {run['runId']} of agent {run['agentId']} already exists")
        self._put(run)
        return run

    async def update(self, run: Document) -> Document:
        key = (run["agentId"], run["runId"])
        if key not in self._rows:
            raise not_found(f"run {run['runId']} of agent {run['agentId']} not found")
        self._put(run)
        return run

    async def delete(self, agent_ids: Sequence[str] | None, run_ids: Sequence[str] | None) -> None:
        for agent_id, run_id in list(self._rows):
            if (agent_ids is None or agent_id in agent_ids) and (
                run_ids is None or run_id in run_ids
            ):
                self._drop(self._rows[(agent_id, run_id)])

    async def list(
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
        return [copy_json(self._rows[(agent_id, run_id)]) for _, run_id, agent_id in keys]


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
        self._order: _Index[BlobRef] = _Index()
        self._by_agent: _Grouped[str, BlobRef] = _Grouped()
        self._by_blob: _Grouped[str, BlobRef] = _Grouped()

    async def get(self, agent_id: str, blob_id: str) -> bytes | None:
        return self._blobs.get(BlobRef(blob_id=blob_id, agent_id=agent_id))

    async def create(self, agent_id: str, blob_id: str, data: bytes) -> None:
        ref = BlobRef(blob_id=blob_id, agent_id=agent_id)
        if ref in self._blobs:
            raise already_exists(f"checkpoint blob {blob_id} of agent {agent_id} already exists")
        self._blobs[ref] = data
        self._order.add(ref)
        self._by_agent.add(agent_id, ref)
        self._by_blob.add(blob_id, ref)

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
                self._order.remove(ref)
                self._by_agent.remove(ref.agent_id, ref)
                self._by_blob.remove(ref.blob_id, ref)

    async def list(
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
                for ref in self._by_blob.after(blob_ids, after, len(self._blobs))
                if wanted is None or ref.agent_id in wanted
            ]
            return refs[:limit]
        if agent_ids is not None:
            return self._by_agent.after(agent_ids, after, limit)
        return self._order.after(after, limit)


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

    async def readiness(self) -> str | None:
        """Always ready: the data is in this process."""
        return None

    def pool_stats(self) -> None:
        """No connections."""
