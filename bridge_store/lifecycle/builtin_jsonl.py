"""The bridge's JSONL store (``--local-store '{"type":"jsonl","rootDir":DIR}'``) as items.

``DIR`` holds ``agents.ndjson``, ``runs.ndjson``, ``run_events.ndjson`` and
``checkpoints.ndjson``, one JSON object a line. The bridge rewrites a whole file (a
temporary file renamed over it) on every write, so a file opened here is a consistent
snapshot of itself however long it is read, and reading never gets in the bridge's way.

Agent and run lines are already CallStore documents. Event lines carry ``createdAt``
as an ISO string (epoch milliseconds over CallStore); checkpoint lines are
``{agentId, blobId, dataBase64}``. A line is read as the installed ``cursor-sdk``'s
``JsonlLocalAgentStore`` reads it: a last line that does not parse or lacks a field
the SDK requires is skipped (a write the bridge did not finish), any other such line
makes the file unreadable.

Events are grouped by run through a temporary SQLite file and blobs are read from
their line when written, so memory stays flat however large the files are.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from bridge_store.errors import ConnectError
from bridge_store.rpc.contract import validate_agent, validate_run
from bridge_store.types import Document
from bridge_store.wire import jsontext

from .builtin import EVENTS_PAGE, UnreadableStore, iso_ms
from .items import AgentItem, BlobItem, BlobReader, EventsItem, Item, RunItem

AGENTS_FILE = "agents.ndjson"
RUNS_FILE = "runs.ndjson"
EVENTS_FILE = "run_events.ndjson"
CHECKPOINTS_FILE = "checkpoints.ndjson"

_AGENT_STATUSES = {"idle", "running", "error", "archived"}
_RUN_STATUSES = {"queued", "running", "finished", "error", "cancelled", "expired"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _null_or_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


# What the SDK requires of each line (anything else is kept as it is).
def _is_agent(row: Document) -> bool:
    return (
        isinstance(row.get("agentId"), str)
        and isinstance(row.get("cwd"), str)
        and row.get("status") in _AGENT_STATUSES
        and _number(row.get("createdAt"))
        and _number(row.get("updatedAt"))
    )


def _is_run(row: Document) -> bool:
    return (
        isinstance(row.get("runId"), str)
        and isinstance(row.get("agentId"), str)
        and _number(row.get("turnNumber"))
        and row.get("status") in _RUN_STATUSES
        and _number(row.get("createdAt"))
        and _number(row.get("updatedAt"))
    )


def _is_event(row: Document) -> bool:
    # payloadRef and idempotencyKey must be present (null or a string), as the SDK checks.
    return (
        isinstance(row.get("runId"), str)
        and _number(row.get("seq"))
        and isinstance(row.get("offset"), str)
        and isinstance(row.get("eventType"), str)
        and isinstance(row.get("createdAt"), str)
        and "payloadRef" in row
        and _null_or_str(row["payloadRef"])
        and "idempotencyKey" in row
        and _null_or_str(row["idempotencyKey"])
    )


def _is_checkpoint(row: Document) -> bool:
    return (
        isinstance(row.get("agentId"), str)
        and isinstance(row.get("blobId"), str)
        and isinstance(row.get("dataBase64"), str)
    )


def _rows(
    path: Path, file: IO[bytes], valid: Callable[[Document], bool]
) -> Iterator[tuple[int, int, Document]]:
    """Each valid line of ``file`` as (offset, length, object); the SDK's rules for bad ones."""
    bad: int | None = None
    offset = 0
    for number, line in enumerate(file, start=1):
        start, offset = offset, offset + len(line)
        if not line.strip():
            continue
        if bad is not None:
            raise UnreadableStore(path, f"line {bad} is not a record the bridge writes")
        try:
            row = _parse(line)
        except (ValueError, RecursionError):  # RecursionError: absurd nesting
            row = None
        if not isinstance(row, dict) or not valid(row):
            bad = number  # skipped if it is the last line, as the bridge skips it
            continue
        yield start, len(line), row


def _parse(line: bytes) -> Any:
    """A line as the SDK's ``JSON.parse`` reads it: ``NaN`` and ``Infinity`` are no JSON
    there (the standard library's parser would take them, and writing them again would
    turn them into nulls)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line.decode("utf-8", "surrogatepass"), parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class JsonlStore:
    """A JSONL store directory (what ``rootDir`` names)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __str__(self) -> str:
        return str(self.directory)

    def exists(self) -> bool:
        return any((self.directory / name).is_file() for name in (AGENTS_FILE, RUNS_FILE))

    def _open(self, name: str, stack: contextlib.ExitStack) -> IO[bytes] | None:
        try:
            return stack.enter_context((self.directory / name).open("rb"))
        except FileNotFoundError:
            return None  # the bridge writes each file only once it has a line for it
        except OSError as error:
            raise UnreadableStore(self.directory / name, error.strerror or str(error)) from None

    def items(self, tenant: str) -> Iterator[Item]:
        """Every agent's runs, their events, its blobs, then the agent, as items of ``tenant``."""
        with contextlib.ExitStack() as stack:
            # Every file is opened first: the snapshot is of one moment, near enough.
            files = {name: self._open(name, stack) for name in (AGENTS_FILE, RUNS_FILE)}
            events_file = self._open(EVENTS_FILE, stack)
            checkpoints_file = self._open(CHECKPOINTS_FILE, stack)
            agents = self._agents(files[AGENTS_FILE])
            runs = self._runs(files[RUNS_FILE])
            events = stack.enter_context(contextlib.closing(self._spill(events_file, stack)))
            blobs = self._blob_lines(checkpoints_file)
            for agent in agents:
                for run in runs.get(agent["agentId"], []):
                    yield RunItem(tenant, run)
                    yield from _events(events, tenant, run["runId"])
                if checkpoints_file is not None:
                    for blob_id, (start, length) in blobs.get(agent["agentId"], {}).items():
                        read = self._reader(checkpoints_file, start, length)
                        yield BlobItem(tenant, agent["agentId"], blob_id, read)
                yield AgentItem(tenant, agent)  # last, as in builtin_sqlite

    def _documents(
        self, name: str, file: IO[bytes] | None, valid: Callable[[Document], bool]
    ) -> Iterator[Document]:
        if file is None:
            return
        for _, _, row in _rows(self.directory / name, file, valid):
            yield row

    def _agents(self, file: IO[bytes] | None) -> list[Document]:
        """The agents, the first line of each id (the one the bridge reads), checked."""
        agents: dict[str, Document] = {}
        for row in self._documents(AGENTS_FILE, file, _is_agent):
            agents.setdefault(row["agentId"], self._checked(validate_agent, row, AGENTS_FILE))
        return list(agents.values())

    def _runs(self, file: IO[bytes] | None) -> dict[str, list[Document]]:
        """Each agent's runs in turn order (the first line of each run id)."""
        runs: dict[tuple[str, str], Document] = {}
        for row in self._documents(RUNS_FILE, file, _is_run):
            runs.setdefault(
                (row["agentId"], row["runId"]), self._checked(validate_run, row, RUNS_FILE)
            )
        by_agent: dict[str, list[Document]] = {}
        for run in sorted(runs.values(), key=lambda run: (run["turnNumber"], run["runId"])):
            by_agent.setdefault(run["agentId"], []).append(run)
        return by_agent

    def _checked(self, validate: Callable[[Any, str], Document], row: Document, name: str) -> Any:
        try:
            return validate(row, name)
        except ConnectError as error:
            raise UnreadableStore(self.directory / name, error.message) from None

    def _spill(self, file: IO[bytes] | None, stack: contextlib.ExitStack) -> sqlite3.Connection:
        """The events, by run and seq, in a temporary SQLite file."""
        spill_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bridge-store-"))
        spill = sqlite3.connect(Path(spill_dir) / "events.db", isolation_level=None)
        spill.execute("PRAGMA journal_mode = OFF")
        spill.execute("CREATE TABLE events (run_id TEXT, seq INTEGER, line BLOB)")
        if file is not None:
            path = self.directory / EVENTS_FILE
            events = (_event(path, row) for _, _, row in _rows(path, file, _is_event))
            spill.execute("BEGIN")
            spill.executemany(
                "INSERT INTO events VALUES (?, ?, ?)",
                ((event["runId"], event["seq"], jsontext.dumps(event)) for event in events),
            )
            spill.execute("COMMIT")
        # Indexed once filled: faster than keeping an index up to date row by row.
        spill.execute("CREATE INDEX by_run ON events (run_id, seq)")
        return spill

    def _blob_lines(self, file: IO[bytes] | None) -> dict[str, dict[str, tuple[int, int]]]:
        """Where each agent's blobs are in the file: (offset, length) by blob id."""
        lines: dict[str, dict[str, tuple[int, int]]] = {}
        if file is None:
            return lines
        for start, length, row in _rows(self.directory / CHECKPOINTS_FILE, file, _is_checkpoint):
            lines.setdefault(row["agentId"], {}).setdefault(row["blobId"], (start, length))
        return {agent: dict(sorted(blobs.items())) for agent, blobs in lines.items()}

    def _reader(self, file: IO[bytes], start: int, length: int) -> BlobReader:
        async def read() -> bytes | None:
            file.seek(start)
            row = jsontext.loads(file.read(length))
            try:
                return base64.b64decode(row["dataBase64"])
            except ValueError as error:
                raise UnreadableStore(self.directory / CHECKPOINTS_FILE, str(error)) from None

        return read


def _event(path: Path, row: Document) -> Document:
    """An event line as the stored event: the SDK keeps every field, ``createdAt`` in ms."""
    seq = row["seq"]
    if isinstance(seq, float) and seq.is_integer():
        seq = int(seq)  # a JavaScript number; stored events carry an integer
    if not isinstance(seq, int) or seq < 1:
        raise UnreadableStore(path, f"an event of run {row['runId']} has seq {seq!r}")
    try:
        return {**row, "seq": seq, "createdAt": iso_ms(row["createdAt"])}
    except ValueError as error:
        raise UnreadableStore(path, f"an event's createdAt: {error}") from None


def _events(spill: sqlite3.Connection, tenant: str, run_id: str) -> Iterator[EventsItem]:
    after: float = 0
    while True:
        rows = spill.execute(
            "SELECT seq, line FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, after, EVENTS_PAGE),
        ).fetchall()
        if rows:
            yield EventsItem(tenant, run_id, [jsontext.loads_document(line) for _, line in rows])
        if len(rows) < EVENTS_PAGE:
            return
        after = rows[-1][0]
