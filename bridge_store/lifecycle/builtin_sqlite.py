"""The bridge's default store: one SQLite store per workspace, read in place as items.

A bridge not pointed at a CallStore server keeps each workspace's history under
``~/.cursor/projects/<slug>/sdk-agent-store/<hash>/``: ``index.db`` (tables
``agents``, ``runs`` and ``run_events``) and one ``agents/agent-<sha256 of the agent
id>/store.db`` per agent that saved a checkpoint (table ``blobs``).

The files are opened read-only (``mode=ro``) where they lie, while a bridge may be
writing them. Both databases are in WAL mode, where readers never block the writer,
and their newest rows may be only in ``index.db-wal``: so never ``immutable=1`` (which
ignores the WAL) and never a copy of ``index.db`` alone. Every read is one short
statement in autocommit mode, so no read transaction stays open while items are being
written elsewhere (which would stop the bridge's WAL checkpoints from catching up),
and a lock is waited for at most :data:`BUSY_TIMEOUT_SECONDS`.

Rows become the documents the bridge itself would have sent over CallStore, as the
installed ``cursor-sdk``'s ``SqliteLocalAgentStore`` reads them: upper-case statuses to
the CallStore ones, ISO timestamps to epoch milliseconds, ``{blobId, storeKind}``
checkpoint refs to ``{schemaVersion: 1, rootBlobId}``, ``model`` and
``model_params_json`` to ``{id, params?}``, columns an older file lacks to null.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bridge_store.types import Document
from bridge_store.wire import jsontext

from .builtin import EVENTS_PAGE, UnreadableStore, iso_ms
from .checks import InvalidItem, checked
from .items import AgentItem, BlobItem, BlobReader, EventsItem, Item, RunItem

#: How long one read waits for a lock the bridge holds (SQLite's busy timeout). WAL
#: readers wait only while the bridge recovers or checkpoints; longer means it is stuck.
BUSY_TIMEOUT_SECONDS = 5.0
#: Agents, runs or blob ids read per statement.
ROWS_PAGE = 200

AGENT_STATUSES = {"IDLE": "idle", "RUNNING": "running", "ERROR": "error", "ARCHIVED": "archived"}
RUN_STATUSES = {
    "QUEUED": "queued",
    "CREATING": "running",
    "RUNNING": "running",
    "FINISHED": "finished",
    "ERROR": "error",
    "CANCELLED": "cancelled",
    "EXPIRED": "expired",
}

#: Where workspace stores are found under a directory given to :func:`find_stores`: the
#: directory itself, its ``sdk-agent-store``, a ``projects`` directory, a ``.cursor``
#: directory, a home directory.
_PATTERNS = (
    "index.db",
    "*/index.db",
    "sdk-agent-store/*/index.db",
    "*/sdk-agent-store/*/index.db",
    "projects/*/sdk-agent-store/*/index.db",
    ".cursor/projects/*/sdk-agent-store/*/index.db",
)


def default_root() -> Path:
    """Where the bridge keeps every workspace's store: ``~/.cursor/projects``."""
    return Path.home() / ".cursor" / "projects"


def find_stores(root: Path) -> list[Path]:
    """The workspace store directories (each holding an ``index.db``) at or under ``root``."""
    found = {index.parent for pattern in _PATTERNS for index in root.glob(pattern)}
    return sorted(found)


def agent_directory(store: Path, agent_id: str) -> Path:
    """The directory of one agent's checkpoint blobs in a workspace store."""
    return store / "agents" / f"agent-{hashlib.sha256(agent_id.encode()).hexdigest()}"


def connect(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only in place, WAL included, in autocommit mode."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        connection = sqlite3.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
        )
        connection.row_factory = sqlite3.Row
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        raise UnreadableStore(path, str(error)) from None
    return connection


class SqliteStore:
    """One workspace's built-in SQLite store (the directory holding ``index.db``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.index = directory / "index.db"

    def __str__(self) -> str:
        return str(self.directory)

    def items(self, tenant: str) -> Iterator[Item]:
        """Every agent's runs, their events, its blobs, then the agent, as items of ``tenant``."""
        with contextlib.closing(connect(self.index)) as index:
            try:
                if not _has_tables(index, "agents", "runs", "run_events"):
                    return  # a store the bridge created but never wrote to
                for agent_row in _pages(index, "SELECT * FROM agents", "agent_id"):
                    yield from self._agent(index, tenant, agent_row)
            except InvalidItem as error:
                raise UnreadableStore(self.index, str(error)) from None
            except (sqlite3.Error, ValueError, KeyError, TypeError, AttributeError) as error:
                # A row the bridge would not have written (or could not read either).
                raise UnreadableStore(self.index, f"{type(error).__name__}: {error}") from None
            except RecursionError:
                raise UnreadableStore(self.index, "a JSON column nests too deep") from None

    def _agent(self, index: sqlite3.Connection, tenant: str, row: sqlite3.Row) -> Iterator[Item]:
        # Checked now: its id names the agent's blob folder, and a row the bridge would
        # not have written (an integer id) must be refused, not followed.
        checked_agent = checked(AgentItem(tenant, agent_document(dict(row))))
        assert isinstance(checked_agent, AgentItem)
        agent = checked_agent.document
        runs = _pages(
            index, "SELECT * FROM runs WHERE agent_id = ?", "turn_number", (agent["agentId"],)
        )
        for run_row in runs:
            run = run_document(dict(run_row))
            yield RunItem(tenant, run)
            yield from _events(index, tenant, run["runId"])
        blobs = agent_directory(self.directory, agent["agentId"]) / "store.db"
        if blobs.is_file():
            yield from _blobs(blobs, tenant, agent["agentId"])
        # Last, as copy writes it: a bridge on the target lists the agent only once its
        # history is there, also when an import is interrupted.
        yield AgentItem(tenant, agent)


def _has_tables(connection: sqlite3.Connection, *names: str) -> bool:
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return set(names) <= {row[0] for row in rows}


def _pages(
    connection: sqlite3.Connection, select: str, key: str, parameters: tuple[Any, ...] = ()
) -> Iterator[sqlite3.Row]:
    """Rows of ``select`` (whose WHERE clause, if any, comes last) by keyset on ``key``.

    Each page is one statement, read whole: nothing stays open between pages.
    """
    joiner = " AND " if " WHERE " in select else " WHERE "
    after: Any = None
    while True:
        if after is None:
            sql, args = f"{select} ORDER BY {key} LIMIT ?", (*parameters, ROWS_PAGE)
        else:
            sql = f"{select}{joiner}{key} > ? ORDER BY {key} LIMIT ?"
            args = (*parameters, after, ROWS_PAGE)
        page = connection.execute(sql, args).fetchall()
        yield from page
        if len(page) < ROWS_PAGE:
            return
        after = page[-1][key]


def _events(index: sqlite3.Connection, tenant: str, run_id: str) -> Iterator[EventsItem]:
    after = 0
    while True:
        rows = index.execute(
            "SELECT * FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, after, EVENTS_PAGE),
        ).fetchall()
        if rows:
            yield EventsItem(tenant, run_id, [event_document(dict(row)) for row in rows])
        if len(rows) < EVENTS_PAGE:
            return
        after = rows[-1]["seq"]


def _blobs(path: Path, tenant: str, agent_id: str) -> Iterator[BlobItem]:
    with contextlib.closing(connect(path)) as blobs:
        try:
            if not _has_tables(blobs, "blobs"):
                return
            for row in _pages(blobs, "SELECT id FROM blobs", "id"):
                yield BlobItem(tenant, agent_id, row["id"], _reader(blobs, path, row["id"]))
        except sqlite3.Error as error:
            raise UnreadableStore(path, str(error)) from None


def _reader(blobs: sqlite3.Connection, path: Path, blob_id: str) -> BlobReader:
    async def read() -> bytes | None:
        try:
            row = blobs.execute("SELECT data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        except sqlite3.Error as error:
            raise UnreadableStore(path, str(error)) from None
        return None if row is None or row[0] is None else bytes(row[0])

    return read


# -- rows to CallStore documents ------------------------------------------------------


def agent_document(row: dict[str, Any]) -> Document:
    """An ``agents`` row as the agent document the bridge sends over CallStore."""
    return {
        "agentId": row["agent_id"],
        "cwd": row["workspace_ref"],
        "status": _status(AGENT_STATUSES, row["status"], "agent", row["agent_id"]),
        "activeRunId": row.get("active_run_id"),
        "latestCheckpoint": _checkpoint_ref(row.get("latest_checkpoint_ref_json")),
        "name": row.get("name"),
        "createdAt": iso_ms(row["created_at"]),
        "updatedAt": iso_ms(row["updated_at"]),
        # Unchanged: it holds the agent's blobEncryptionKey (and whatever else the SDK
        # keeps there). The SDK reads an empty column as {}.
        "sdkMetadata": _json(row.get("metadata_json"), {}),
    }


def run_document(row: dict[str, Any]) -> Document:
    """A ``runs`` row as the run document the bridge sends over CallStore."""
    status = _status(RUN_STATUSES, row["status"], "run", row["run_id"])
    ended = _first_time(row.get("finished_at"), row.get("cancelled_at"), row.get("expired_at"))
    if ended is None and status == "error":
        # The file keeps no end time for a failed run, but the bridge sends one over
        # CallStore (and writes one to its JSONL store): the time of its last update,
        # when it failed. Runs are not updated after they end.
        ended = iso_ms(row["updated_at"])
    return {
        "runId": row["run_id"],
        "requestId": row.get("request_id"),
        "agentId": row["agent_id"],
        "turnNumber": row["turn_number"],
        "status": status,
        "model": _model(row.get("model"), row.get("model_params_json")),
        "result": row.get("result"),
        "error": row.get("error_code"),
        "usageRef": row.get("usage_ref"),
        "usage": _json(row.get("usage_json"), None),
        "createdAt": iso_ms(row["created_at"]),
        "updatedAt": iso_ms(row["updated_at"]),
        "startedAt": _first_time(row.get("started_at")),
        "endedAt": ended,
        "startCheckpointRef": _checkpoint_ref(row.get("start_checkpoint_ref_json")),
        "latestCheckpointRef": _checkpoint_ref(row.get("latest_checkpoint_ref_json")),
    }


def event_document(row: dict[str, Any]) -> Document:
    """A ``run_events`` row as the stored event (seq, offset and key unchanged)."""
    return {
        "runId": row["run_id"],
        "seq": row["seq"],
        "offset": row["offset"],
        "eventType": row["event_type"],
        "payload": _json(row.get("payload_json"), None),
        "payloadRef": row.get("payload_ref"),
        "idempotencyKey": row.get("idempotency_key"),
        "createdAt": iso_ms(row["created_at"]),
    }


def _status(statuses: dict[str, str], stored: str, what: str, item_id: str) -> str:
    try:
        return statuses[stored]
    except KeyError:
        raise ValueError(
            f"{what} {item_id} has a status the bridge does not write: {stored!r}"
        ) from None


def _json(text: str | None, empty: Any) -> Any:
    """A JSON column; ``empty`` for NULL or an empty string (the SDK reads both so)."""
    return jsontext.loads(text) if text else empty


def _first_time(*values: str | None) -> int | None:
    return next((iso_ms(value) for value in values if value), None)


def _checkpoint_ref(text: str | None) -> Document | None:
    ref = _json(text, None)
    if not isinstance(ref, dict):
        return None
    return {"schemaVersion": 1, "rootBlobId": ref["blobId"]}


def _model(model: str | None, params: str | None) -> Document | None:
    if model is None:
        return None
    if params is None:
        return {"id": model}
    return {"id": model, "params": _json(params, [])}


def stores_of(roots: Iterable[Path]) -> list[SqliteStore]:
    """The workspace stores found at or under each of ``roots``, each once."""
    found = dict.fromkeys(store for root in roots for store in find_stores(root))
    return [SqliteStore(directory) for directory in found]
