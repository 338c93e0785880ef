"""A minimal in-memory ``LocalAgentStoreHandler`` for cursor-sdk's ``StoreCallbackServer``.

The reference the load bench compares bridge-store with: the server the Cursor SDK
itself ships for host-owned stores, holding a store as small as the contract allows.
Its semantics are honest (lists ordered and paged as the contract says, gapless
``seq`` per run under concurrent appends, idempotency keys honoured, conflicts
refused) but minimal: no validation of documents, dicts under one lock, offsets as
list cursors. ``StoreCallbackServer`` serves each request on its own thread, hence
the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

Document = dict[str, Any]


class StoreConflict(Exception):
    """already_exists or not_found: the reference server answers these with HTTP 500."""


def _page(items: list[Any], filter_: Mapping[str, Any], default_limit: int) -> Document:
    """One page of ``items`` after the filter's cursor (a decimal index)."""
    start = int(filter_.get("cursor") or 0)
    limit = int(filter_.get("limit") or default_limit)
    page: Document = {"items": items[start : start + limit]}
    if start + limit < len(items):
        page["nextCursor"] = str(start + limit)
    return page


class _Rows:
    """Documents by key, for agents and runs."""

    def __init__(self, lock: threading.Lock, key: Callable[[Mapping[str, Any]], Any]) -> None:
        self._lock = lock
        self._key = key
        self.rows: dict[Any, Document] = {}

    def _create(self, document: Document) -> Document:
        with self._lock:
            key = self._key(document)
            if key in self.rows:
                raise StoreConflict(f"already exists: {key}")
            self.rows[key] = document
        return document

    def _update(self, document: Document) -> Document:
        with self._lock:
            key = self._key(document)
            if key not in self.rows:
                raise StoreConflict(f"not found: {key}")
            self.rows[key] = document
        return document


class Agents(_Rows):
    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock, lambda document: document["agentId"])

    def get(self, payload: Mapping[str, Any]) -> Document | None:
        return self.rows.get(payload["agentId"])

    def create(self, payload: Mapping[str, Any]) -> Document:
        return self._create(dict(payload["agent"]))

    def update(self, payload: Mapping[str, Any]) -> Document:
        return self._update(dict(payload["agent"]))

    def delete(self, payload: Mapping[str, Any]) -> None:
        filter_ = payload.get("filter") or {}
        ids, cwd = filter_.get("agentIds"), filter_.get("cwd")
        with self._lock:
            for key, row in list(self.rows.items()):
                if (not ids or key in ids) and (cwd is None or row.get("cwd") == cwd):
                    del self.rows[key]

    def list(self, payload: Mapping[str, Any]) -> Document:
        filter_ = payload.get("filter") or {}
        cwd = filter_.get("cwd")
        with self._lock:
            rows = [row for row in self.rows.values() if cwd is None or row.get("cwd") == cwd]
        rows.sort(key=lambda row: (row["updatedAt"], row["agentId"]), reverse=True)
        return _page(rows, filter_, 50)


class Runs(_Rows):
    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock, lambda document: (document["agentId"], document["runId"]))

    def get(self, payload: Mapping[str, Any]) -> Document | None:
        return self.rows.get((payload["agentId"], payload["runId"]))

    def create(self, payload: Mapping[str, Any]) -> Document:
        return self._create(dict(payload["run"]))

    def update(self, payload: Mapping[str, Any]) -> Document:
        return self._update(dict(payload["run"]))

    def _matches(self, row: Mapping[str, Any], filter_: Mapping[str, Any]) -> bool:
        agent_ids, run_ids = filter_.get("agentIds"), filter_.get("runIds")
        return (not agent_ids or row["agentId"] in agent_ids) and (
            not run_ids or row["runId"] in run_ids
        )

    def delete(self, payload: Mapping[str, Any]) -> None:
        filter_ = payload.get("filter") or {}
        with self._lock:
            for key, row in list(self.rows.items()):
                if self._matches(row, filter_):
                    del self.rows[key]

    def list(self, payload: Mapping[str, Any]) -> Document:
        filter_ = payload.get("filter") or {}
        with self._lock:
            rows = [row for row in self.rows.values() if self._matches(row, filter_)]
        rows.sort(key=lambda row: (row["turnNumber"], row["runId"]))
        return _page(rows, filter_, 50)


class RunEvents:
    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.logs: dict[str, list[Document]] = {}
        self._by_key: dict[tuple[str, str], Document] = {}

    def append(self, payload: Mapping[str, Any]) -> Document:
        run_id = payload["runId"]
        key = payload.get("idempotencyKey")
        with self._lock:
            if key is not None and (run_id, key) in self._by_key:
                return self._by_key[(run_id, key)]
            log = self.logs.setdefault(run_id, [])
            seq = len(log) + 1
            event = {
                "runId": run_id,
                "seq": seq,
                "offset": str(seq),
                "eventType": payload["eventType"],
                "payload": payload.get("payload"),
                "payloadRef": payload.get("payloadRef"),
                "idempotencyKey": key,
                "createdAt": int(time.time() * 1000),
            }
            log.append(event)
            if key is not None:
                self._by_key[(run_id, key)] = event
        return event

    def list(self, payload: Mapping[str, Any]) -> Document:
        after = int(payload.get("afterOffset") or 0)
        limit = int(payload.get("limit") or 100)
        with self._lock:
            log = self.logs.get(payload["runId"], [])
            # seq n sits at index n - 1, so the events after offset start at index after.
            items = log[after : after + limit]
            more = after + limit < len(log)
        page: Document = {"items": items}
        if more:
            page["nextOffset"] = items[-1]["offset"]
        return page

    def delete(self, payload: Mapping[str, Any]) -> None:
        run_ids = (payload.get("filter") or {}).get("runIds")
        with self._lock:
            for run_id in run_ids or list(self.logs):
                self.logs.pop(run_id, None)
            self._by_key = {
                key: event for key, event in self._by_key.items() if key[0] in self.logs
            }


class Checkpoints:
    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.blobs: dict[tuple[str, str], str] = {}

    def get(self, payload: Mapping[str, Any]) -> Document:
        data = self.blobs.get((payload["agentId"], payload["blobId"]))
        return {"found": False} if data is None else {"found": True, "data": data}

    def create(self, payload: Mapping[str, Any]) -> None:
        key = (payload["agentId"], payload["blobId"])
        with self._lock:
            if key in self.blobs:
                raise StoreConflict(f"already exists: {key}")
            self.blobs[key] = payload["data"]

    def update(self, payload: Mapping[str, Any]) -> None:
        key = (payload["agentId"], payload["blobId"])
        with self._lock:
            if key not in self.blobs:
                raise StoreConflict(f"not found: {key}")
            self.blobs[key] = payload["data"]

    def _matches(self, key: tuple[str, str], filter_: Mapping[str, Any]) -> bool:
        agent_ids, blob_ids = filter_.get("agentIds"), filter_.get("blobIds")
        return (not agent_ids or key[0] in agent_ids) and (not blob_ids or key[1] in blob_ids)

    def delete(self, payload: Mapping[str, Any]) -> None:
        filter_ = payload.get("filter") or {}
        with self._lock:
            for key in [key for key in self.blobs if self._matches(key, filter_)]:
                del self.blobs[key]

    def list(self, payload: Mapping[str, Any]) -> Document:
        filter_ = payload.get("filter") or {}
        with self._lock:
            ids = sorted({key[1] for key in self.blobs if self._matches(key, filter_)})
        return _page(ids, filter_, 50)


class ReferenceStore:
    """The four substores ``StoreCallbackServer`` dispatches to."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self.agents = Agents(lock)
        self.runs = Runs(lock)
        self.run_events = RunEvents(lock)
        self.checkpoints = Checkpoints(lock)
