"""``bridge-store import-local`` of a bridge's own store holding what the bridge never
writes (an integer agent_id, 100,000-deep nesting, non-UTF-8 text, NaN, updatedAt
"yesterday"): one line and exit status 2, both for the SQLite and the JSONL form, and
no agent shown half-imported; fixed, a rerun finishes (issue 21)."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.errors import EXIT_CONFIGURATION
from tests.support.lifecycle import on_stores, snapshot
from tests.test_copy import routes

AGENT = {
    "agent_id": "agent-1",
    "workspace_ref": "/w",
    "status": "IDLE",
    "active_run_id": None,
    "latest_checkpoint_ref_json": None,
    "name": "one",
    "metadata_json": '{"blobEncryptionKey": "k"}',
    "created_at": "2026-11-30T22:48:15.455Z",
    "updated_at": "2026-11-30T22:48:16.000Z",
}
RUN = {
    "run_id": "run-1",
    "agent_id": "agent-1",
    "turn_number": 1,
    "status": "FINISHED",
    "model": None,
    "created_at": "2026-11-30T22:48:15.500Z",
    "updated_at": "2026-11-30T22:48:16.000Z",
    "finished_at": "2026-11-30T22:48:16.000Z",
}
EVENT = {
    "run_id": "run-1",
    "seq": 1,
    "offset": "1",
    "event_type": "run_stream_event",
    "payload_json": '{"text": "hello"}',
    "payload_ref": None,
    "idempotency_key": None,
    "created_at": "2026-11-30T22:48:15.600Z",
}
SCHEMA = (
    "CREATE TABLE agents (agent_id PRIMARY KEY, workspace_ref, status, active_run_id, "
    "latest_checkpoint_ref_json, name, metadata_json, created_at, updated_at)",
    "CREATE TABLE runs (run_id PRIMARY KEY, request_id, agent_id, turn_number, status, model, "
    "model_params_json, start_checkpoint_ref_json, latest_checkpoint_ref_json, error_code, "
    "usage_ref, usage_json, result, created_at, updated_at, started_at, finished_at, "
    "cancelled_at, expired_at)",
    "CREATE TABLE run_events (run_id, seq, offset TEXT, event_type, payload_json, payload_ref, "
    "idempotency_key, created_at, PRIMARY KEY (run_id, seq))",
)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def sqlite_store(directory: Path, agent: dict[str, Any], run: dict[str, Any], event: Any) -> Path:
    """A workspace store as the bridge lays it out (docs: BUILTIN-STORES), one of each row."""
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(directory / "index.db")) as index:
        for statement in SCHEMA:
            index.execute(statement)
        for table, row in (("agents", agent), ("runs", run), ("run_events", event)):
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            insert = f"INSERT INTO {table} ({names}) VALUES ({marks})"  # noqa: S608 - our names
            index.execute(insert, list(row.values()))
        index.commit()
    return directory


SQLITE: dict[str, tuple[str, dict[str, Any], str]] = {
    # case: (table, changes, what the one line says)
    "integer agent_id": ("agents", {"agent_id": 5}, "agent.agentId must be a non-empty string"),
    "100,000-deep metadata": ("agents", {"metadata_json": _deep(100_000)}, "nests too deep"),
    "metadata deeper than a call may": (
        "agents",
        {"metadata_json": f'{{"a": {_deep(200)}}}'},
        "agent nests deeper than 128 levels",
    ),
    "updated_at yesterday": ("agents", {"updated_at": "yesterday"}, "Invalid isoformat string"),
    "no workspace": ("agents", {"workspace_ref": None}, "agent.cwd must be a string"),
    "non-UTF-8 name": ("agents", {"name": b"\xff\xfe"}, "Could not decode to UTF-8"),
    "text turn_number": ("runs", {"turn_number": "two"}, "run.turnNumber must be an integer"),
    "100,000-deep payload": ("run_events", {"payload_json": _deep(100_000)}, "nests too deep"),
    "NaN payload": ("run_events", {"payload_json": '{"n": NaN}'}, "number JSON cannot carry"),
    "seq beyond 64 bits": ("run_events", {"seq": 2.0**70}, "event.seq must be an integer"),
}


def _sqlite_case(directory: Path, case: str) -> Path:
    table, changes, _ = SQLITE[case]
    rows: dict[str, dict[str, Any]] = {
        "agents": {**AGENT},
        "runs": {**RUN},
        "run_events": {**EVENT},
    }
    rows[table].update(changes)
    if table == "agents" and "agent_id" in changes:
        rows["runs"]["agent_id"] = changes["agent_id"]
    store = sqlite_store(directory, rows["agents"], rows["runs"], rows["run_events"])
    for column, value in changes.items():
        # Bytes as TEXT that is not UTF-8 (what a damaged file holds), not as a BLOB.
        if isinstance(value, bytes):
            with contextlib.closing(sqlite3.connect(store / "index.db")) as index:
                update = f"UPDATE {table} SET {column} = CAST(? AS TEXT)"  # noqa: S608 - ours
                index.execute(update, (value,))
                index.commit()
    return store


def _one_line_exit_2(arguments: list[str], capsys: pytest.CaptureFixture[str], message: str) -> str:
    status = main(arguments)
    err = capsys.readouterr().err
    assert status == EXIT_CONFIGURATION, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bridge-store: cannot import ")
    assert message in lines[0]
    return lines[0]


def _no_agent(target: list[str]) -> None:
    """Agents are written last: whatever an import stopped on, no agent shows half of it."""
    held = on_stores(routes(target), lambda stores: snapshot(stores, ("default",)))
    assert not [key for key in held if "/agent/" in key]


@pytest.mark.parametrize("case", SQLITE, ids=list(SQLITE))
def test_a_hostile_sqlite_bridge_store_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _sqlite_case(tmp_path / "store", case)
    target = ["--store", f"sqlite:///{tmp_path / 'target.db'}"]
    line = _one_line_exit_2(
        ["import-local", *target, "--from", str(store)], capsys, SQLITE[case][2]
    )
    assert str(store) in line
    _no_agent(target)


def test_an_import_stopped_by_a_bad_row_is_finished_once_the_row_is_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _sqlite_case(tmp_path / "store", "NaN payload")
    target = ["--store", f"sqlite:///{tmp_path / 'target.db'}"]
    arguments = ["import-local", *target, "--from", str(store)]
    _one_line_exit_2(arguments, capsys, "number JSON cannot carry")
    with contextlib.closing(sqlite3.connect(store / "index.db")) as index:
        index.execute("UPDATE run_events SET payload_json = ?", ('{"n": 1}',))
        index.commit()
    assert main(arguments) == 0
    assert "imported 2, already present 1" in capsys.readouterr().out


JSONL_AGENT = {
    "agentId": "agent-1",
    "cwd": "/w",
    "status": "idle",
    "createdAt": 1,
    "updatedAt": 2,
    "sdkMetadata": {"blobEncryptionKey": "k"},
}
JSONL_EVENT = {
    "runId": "run-1",
    "seq": 1,
    "offset": "1",
    "eventType": "e",
    "payload": None,
    "payloadRef": None,
    "idempotencyKey": None,
    "createdAt": "2026-11-30T22:48:15.600Z",
}
JSONL_RUN = {
    "runId": "run-1",
    "agentId": "agent-1",
    "turnNumber": 1,
    "status": "finished",
    "createdAt": 1,
    "updatedAt": 2,
}


def _line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


def _agents_first(bad: bytes) -> Callable[[Path], object]:
    """A bad agents.ndjson line before a good one (a last bad line the bridge skips)."""
    return lambda root: (root / "agents.ndjson").write_bytes(bad + _line(JSONL_AGENT))


JSONL: dict[str, tuple[Callable[[Path], object], str]] = {
    "integer agentId": (
        _agents_first(_line({**JSONL_AGENT, "agentId": 5})),
        "line 1 is not a record the bridge writes",
    ),
    "100,000-deep line": (
        _agents_first(f'{{"agentId": {_deep(100_000)}}}\n'.encode()),
        "line 1 is not a record the bridge writes",
    ),
    "non-UTF-8 line": (
        _agents_first(b'{"agentId": "\xff"}\n'),
        "line 1 is not a record the bridge writes",
    ),
    "huge integer": (
        _agents_first(b'{"agentId": "a", "updatedAt": 1%s}\n' % (b"0" * 5000)),
        "line 1 is not a record the bridge writes",
    ),
    "updatedAt yesterday": (
        _agents_first(_line({**JSONL_AGENT, "updatedAt": "yesterday"})),
        "line 1 is not a record the bridge writes",
    ),
    "metadata deeper than a call may": (
        lambda root: (root / "agents.ndjson").write_bytes(
            _line({**JSONL_AGENT, "sdkMetadata": {"a": json.loads(_deep(200))}})
        ),
        "agent nests deeper than 128 levels",
    ),
    "event createdAt yesterday": (
        lambda root: (root / "run_events.ndjson").write_bytes(
            _line({**JSONL_EVENT, "createdAt": "yesterday"}) + _line(JSONL_EVENT)
        ),
        "an event's createdAt",
    ),
    # The SDK's JSON.parse takes no NaN: the line is as bad as an unreadable one (and
    # written again, NaN would have become a null).
    "event NaN payload": (
        lambda root: (root / "run_events.ndjson").write_bytes(
            _line({**JSONL_EVENT, "payload": float("nan")}) + _line(JSONL_EVENT)
        ),
        "line 1 is not a record the bridge writes",
    ),
}


@pytest.mark.parametrize("case", JSONL, ids=list(JSONL))
def test_a_hostile_jsonl_bridge_store_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "jsonl"
    root.mkdir()
    (root / "agents.ndjson").write_bytes(_line(JSONL_AGENT))
    (root / "runs.ndjson").write_bytes(_line(JSONL_RUN))
    (root / "run_events.ndjson").write_bytes(_line(JSONL_EVENT))
    write, message = JSONL[case]
    write(root)
    target = ["--store", f"sqlite:///{tmp_path / 'target.db'}"]
    _one_line_exit_2(["import-local", *target, "--jsonl", str(root)], capsys, message)
    _no_agent(target)


def test_a_blob_over_the_request_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "jsonl"
    root.mkdir()
    (root / "agents.ndjson").write_bytes(_line(JSONL_AGENT))
    blob = {
        "agentId": "agent-1",
        "blobId": "b",
        "dataBase64": base64.b64encode(b"x" * 100).decode(),
    }
    (root / "checkpoints.ndjson").write_bytes(_line(blob))
    target = ["--store", f"sqlite:///{tmp_path / 'target.db'}"]
    arguments = ["import-local", *target, "--jsonl", str(root), "--max-request-bytes", "99"]
    _one_line_exit_2(arguments, capsys, "100 bytes, over the 99-byte request limit")
    _no_agent(target)
    assert main([*arguments[:-1], "100"]) == 0
