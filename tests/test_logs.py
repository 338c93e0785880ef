"""Logs: one configuration for every logger, JSON or text lines, request ids, no content."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge_store.ops.logs import CallContext, JsonFormatter, TextFormatter, logging_config
from bridge_store.ops.observe import CURRENT_CALL, CallObservation, request_id
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.config import READY_PREFIX
from tests.support.server import ServerProcess, serve

SECRET_CONTENT = "private-document-text-7f3a"


def call(server: ServerProcess, headers: dict[str, str] | None = None) -> httpx.Response:
    agent = {
        "agentId": "logged",
        "cwd": "/w",
        "status": "idle",
        "activeRunId": None,
        "name": SECRET_CONTENT,
        "createdAt": 1,
        "updatedAt": 1,
        "sdkMetadata": {"note": SECRET_CONTENT},
    }
    return httpx.post(
        server.url + CALL_STORE_PATH.lstrip("/"),
        json={"substore": "agents", "method": "create", "input": {"agent": agent}},
        headers={"authorization": f"Bearer {server.token}", **(headers or {})},
        timeout=30.0,
    )


def log_lines(server: ServerProcess) -> list[str]:
    """The server's stderr once it has stopped, without the ready line."""
    server.stop()
    return [line for line in server.stderr_lines if not line.startswith(READY_PREFIX)]


@pytest.fixture
def json_server(tmp_path: Path) -> Iterator[ServerProcess]:
    # No schema: the SQL backend warns at start, and calls answer `unavailable`.
    store = f"sqlite:///{tmp_path / 'empty.db'}"
    (tmp_path / "empty.db").touch(mode=0o600)  # --no-migrate creates no database
    with serve("--store", store, "--no-migrate", "--log-format", "json", "--access-log") as server:
        yield server


def test_json_lines_from_every_logger(json_server: ServerProcess) -> None:
    response = call(json_server, {"X-Request-Id": "caller-id-42"})
    assert response.status_code == 503
    assert response.headers["x-request-id"] == "caller-id-42"
    httpx.get(json_server.url + "healthz")
    token = json_server.token
    entries = [json.loads(line) for line in log_lines(json_server)]

    for entry in entries:
        assert {"time", "level", "logger", "message"} <= entry.keys()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["time"])
    loggers = {entry["logger"] for entry in entries}
    assert {"uvicorn", "uvicorn.access", "bridge_store.access"} <= loggers
    # uvicorn's server lines ("Started server process") are no errors.
    assert "uvicorn.error" not in loggers
    started = [e for e in entries if e["message"].startswith("Started server process")]
    assert [(e["logger"], e["level"]) for e in started] == [("uvicorn", "INFO")]
    # bridge_store's warnings go through the configured handler, not the last resort.
    (warning,) = [entry for entry in entries if entry["logger"] == "bridge_store_sql.backend"]
    assert warning["level"] == "WARNING"
    assert "bridge-store db upgrade" in warning["message"]

    (access,) = [entry for entry in entries if entry["logger"] == "bridge_store.access"]
    assert access["request_id"] == "caller-id-42"
    assert (access["substore"], access["method"], access["code"]) == (
        "agents",
        "create",
        "unavailable",
    )
    assert isinstance(access["duration_ms"], float)
    assert access["duration_ms"] > 0
    # uvicorn's own line for the call is dropped (ours says more); others stay.
    uvicorn_access = [e["message"] for e in entries if e["logger"] == "uvicorn.access"]
    assert not [message for message in uvicorn_access if CALL_STORE_PATH in message]
    assert [message for message in uvicorn_access if "GET /healthz" in message]

    everything = "\n".join(json.dumps(entry) for entry in entries)
    assert SECRET_CONTENT not in everything
    assert token not in everything


def test_text_is_the_default_and_calls_are_logged_only_on_request(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with serve("--store", store) as quiet:
        call(quiet)
        assert not [line for line in log_lines(quiet) if "bridge_store.access" in line]
    with serve("--store", store, "--access-log") as server:
        response = call(server, {"X-Request-Id": "text-id"})
        assert response.status_code == 409  # created by the first server
        lines = log_lines(server)
    (access,) = [line for line in lines if " bridge_store.access: " in line]
    assert [line for line in lines if " INFO uvicorn: Started server process " in line]
    assert not [line for line in lines if "uvicorn.error" in line]
    assert re.fullmatch(
        r"\S+ \S+ INFO bridge_store\.access: agents\.create already_exists \d+\.\d{3} ms "
        r"request_id=text-id",
        access.rstrip("\n"),
    )
    assert not [line for line in lines if line.startswith("{")]
    assert SECRET_CONTENT not in "\n".join(lines)


def test_a_request_id_is_generated_when_the_caller_sends_none_or_a_bad_one(
    json_server: ServerProcess,
) -> None:
    generated = call(json_server).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert call(json_server).headers["x-request-id"] != generated
    replaced = call(json_server, {"X-Request-Id": 'has spaces; and quotes"'})
    assert re.fullmatch(r"[0-9a-f]{32}", replaced.headers["x-request-id"])
    long = "a" * 500
    assert call(json_server, {"X-Request-Id": long}).headers["x-request-id"] == "a" * 128


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ("01J9ZQ4ZK5R7N2V8X3Y6W1T0AB", True),
        ("2f0e6c1a-8d7b-4e39-a3b5-0c9d8e7f6a5b", True),
        ("trace:abc/def+ghi=", True),
        ("  padded  ", True),
        ("", False),
        ("line\\nbreak", False),
        ('{"json": 1}', False),
        ("ünïcode", False),
    ],
)
def test_request_id_validation(header: str, kept: bool) -> None:
    chosen = request_id(header)
    if kept:
        assert chosen == header.strip()
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", chosen)


def emitted(formatter: logging.Formatter, observation: CallObservation | None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(CallContext())
    logger = logging.getLogger("bridge_store.tests.logs")
    logger.propagate = False
    logger.addHandler(handler)
    token = CURRENT_CALL.set(observation)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("backend said %s", "no")
    finally:
        CURRENT_CALL.reset(token)
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_line_logged_during_a_call_carries_its_request_id() -> None:
    observation = CallObservation("req-7")
    observation.labels = ("runs", "update", None)
    entry: dict[str, Any] = json.loads(emitted(JsonFormatter(), observation))
    assert entry["message"] == "backend said no"
    assert (entry["level"], entry["logger"]) == ("ERROR", "bridge_store.tests.logs")
    assert (entry["request_id"], entry["substore"], entry["method"]) == ("req-7", "runs", "update")
    assert "ValueError: boom" in entry["exception"]
    assert "code" not in entry

    outside = json.loads(emitted(JsonFormatter(), None))
    assert "request_id" not in outside

    text = emitted(TextFormatter(), observation)
    first_line = text.splitlines()[0]
    assert first_line.endswith(" ERROR bridge_store.tests.logs: backend said no request_id=req-7")


def test_one_configuration_for_uvicorn_and_bridge_store_loggers() -> None:
    config = logging_config("json", "debug")
    loggers = config["loggers"]
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "bridge_store", "bridge_store_sql"):
        assert loggers[name] == {"level": "DEBUG", "handlers": [], "propagate": True} | (
            {"filters": ["skip_call_store_access"]} if name == "uvicorn.access" else {}
        )
    # Libraries stay at warnings even at debug: SQLAlchemy's statement log carries
    # documents, HTTP clients' debug output carries credentials.
    assert config["root"] == {"level": "WARNING", "handlers": ["stderr"]}
    assert "sqlalchemy" not in loggers
    with pytest.raises(ValueError, match="log format"):
        logging_config("xml", "info")
