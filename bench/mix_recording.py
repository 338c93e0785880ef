"""The recorded bridge traffic the load mix is made from, as templates with holes.

``bench/data/bridge-traffic.jsonl`` holds the CallStore calls the real
``cursor-sdk-bridge`` made through one agent life cycle; this module reads it and turns
each operation of the mix (:mod:`bench.mix`) into a :class:`Template`: the recorded
body, compact as connect-node sends it, with its ids and timestamps replaced by
``{{HOLE}}`` holes that a seeded record or a per-request value fills.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

RECORDING = Path(__file__).parent / "data" / "bridge-traffic.jsonl"

_HOLE = re.compile(r"\{\{([A-Z_]+)\}\}")
#: Size of every checkpoint blob of the mix.
BLOB_BYTES = 4096


@dataclass(frozen=True)
class Template:
    """A CallStore JSON body with ``{{HOLE}}`` holes."""

    text: str

    @cached_property
    def literals(self) -> list[str]:
        """The text between holes: one more than :attr:`holes`."""
        return _HOLE.split(self.text)[0::2]

    @cached_property
    def holes(self) -> list[str]:
        return _HOLE.split(self.text)[1::2]

    def render(self, values: Mapping[str, str]) -> str:
        parts = [self.literals[0]]
        for hole, literal in zip(self.holes, self.literals[1:], strict=True):
            parts += [values[hole], literal]
        return "".join(parts)


def random_blob(rng: random.Random) -> tuple[str, str]:
    """(blob id, base64 data): random bytes, as encrypted checkpoint blobs are."""
    data = rng.randbytes(BLOB_BYTES)
    return hashlib.sha256(data).hexdigest(), base64.b64encode(data).decode("ascii")


# -- the recording -----------------------------------------------------------------


def recorded_calls(path: Path = RECORDING) -> list[dict[str, Any]]:
    """The CallStore lines of the recording (``step`` lines dropped)."""
    lines = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if "substore" in line]


def _first(calls: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for call in calls:
        if f"{call['substore']}.{call['method']}" == name:
            found: dict[str, Any] = call["input"]
            return found
    raise ValueError(f"the recording has no {name} call")


def _holes_for_ids(text: str, ids: Mapping[str, str]) -> str:
    for recorded, hole in ids.items():
        text = text.replace(recorded, "{{" + hole + "}}")
    return text


def _body(name: str, data: Any) -> str:
    substore, method = name.split(".")
    call = {"substore": substore, "method": method, "input": data}
    # Compact, as connect-node sends it.
    return json.dumps(call, separators=(",", ":"))


def _numeric_holes(text: str) -> str:
    """``"#NAME#"`` string placeholders become bare ``{{NAME}}`` holes (JSON numbers)."""
    return re.sub(r'"#([A-Z_]+)#"', r"{{\1}}", text)


@dataclass(frozen=True)
class Recorded:
    """The recorded documents, with their ids, the mix's templates are made from."""

    agent: dict[str, Any]
    run: dict[str, Any]
    events: list[dict[str, Any]]
    agents_list_filters: list[dict[str, Any]]
    runs_list: dict[str, Any]
    run_get: dict[str, Any]
    agent_get: dict[str, Any]
    events_list: dict[str, Any]

    @property
    def ids(self) -> dict[str, str]:
        run_id = self.run["runId"]
        request_ids = {
            event["payload"]["message"]["request_id"]
            for event in self.events
            if "request_id" in event["payload"]["message"]
        }
        return {
            self.agent["agentId"]: "AGENT",
            run_id: "RUN",
            self.agent["cwd"]: "CWD",
            **{request_id: "REQUEST" for request_id in request_ids},
        }


def read_recording(path: Path = RECORDING) -> Recorded:
    calls = recorded_calls(path)
    run = _first(calls, "runs.create")["run"]
    events = [
        call["input"]
        for call in calls
        if call["substore"] == "runEvents"
        and call["method"] == "append"
        and call["input"]["runId"] == run["runId"]
    ]
    agents_lists = [
        call["input"] for call in calls if (call["substore"], call["method"]) == ("agents", "list")
    ]
    return Recorded(
        agent=_first(calls, "agents.create")["agent"],
        run=run,
        events=events,
        agents_list_filters=agents_lists,
        runs_list=_first(calls, "runs.list"),
        run_get=_first(calls, "runs.get"),
        agent_get=_first(calls, "agents.get"),
        events_list=_first(calls, "runEvents.list"),
    )


# -- templates ---------------------------------------------------------------------


def _agent_document(recorded: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **recorded,
        "agentId": "@",
        "status": "running",
        "activeRunId": "@",
        "name": "{{NAME}}",
        "createdAt": "#CREATED#",
        "updatedAt": "#NOW#",
        "sdkMetadata": {"blobEncryptionKey": "{{KEY}}"},
    }


def _run_document(recorded: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **recorded,
        "requestId": "@",
        "turnNumber": "#TURN#",
        "status": "running",
        "createdAt": "#CREATED#",
        "updatedAt": "#NOW#",
        "startedAt": "#CREATED#",
    }


def _ended_run_document(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The run as the update that ends it writes it (``python -m bench export-runs``)."""
    return {**_run_document(recorded), "status": "finished", "endedAt": "#NOW#"}


def _padded_event(event: Mapping[str, Any], size: int) -> dict[str, Any]:
    """``event`` with its message text grown so its input is ``size`` bytes of JSON."""
    padded: dict[str, Any] = json.loads(json.dumps(event))
    message = padded["payload"]["message"]
    message["message"] = message.get("message", "")
    missing = size - len(json.dumps(padded))
    if missing > 0:
        # Words, not one repeated byte: a streamed message is prose or code.
        words = " ".join(f"token{i % 97}" for i in range(missing // 6 + 1))
        message["message"] += " " + words[: missing - 1]
    return padded


def templates_of(recorded: Recorded) -> dict[str, Template]:
    """Every operation's template, by operation key."""
    ids = recorded.ids
    request_event, status_event, error_event = recorded.events[:3]
    texts: dict[str, str] = {
        "runEvents.append:request": _body("runEvents.append", request_event),
        "runEvents.append:status": _body("runEvents.append", status_event),
        "runEvents.append:status-error": _body("runEvents.append", error_event),
        "runEvents.append:message-1k": _body("runEvents.append", _padded_event(error_event, 1024)),
        "runEvents.append:message-4k": _body("runEvents.append", _padded_event(error_event, 4096)),
        "runEvents.list:poll": _body(
            "runEvents.list", {**recorded.events_list, "afterOffset": "{{AFTER}}"}
        ),
        "agents.get": _body("agents.get", recorded.agent_get),
        "runs.get": _body("runs.get", recorded.run_get),
        "runs.update": _body("runs.update", {"run": _run_document(recorded.run)}),
        "runs.update:ended": _body("runs.update", {"run": _ended_run_document(recorded.run)}),
        "agents.update": _body("agents.update", {"agent": _agent_document(recorded.agent)}),
        "agents.list:first-page": _body("agents.list", recorded.agents_list_filters[0]),
        "agents.list:cwd": _body("agents.list", recorded.agents_list_filters[-1]),
        "runs.list": _body("runs.list", recorded.runs_list),
        "checkpoints.get": _body("checkpoints.get", {"agentId": "{{AGENT}}", "blobId": "{{BLOB}}"}),
        "checkpoints.create": _body(
            "checkpoints.create",
            {
                "agentId": "{{AGENT}}",
                "blobId": "{{UNIQUE}}",
                "data": random_blob(random.Random(2))[1],
            },
        ),
    }
    templates = {}
    for key, text in texts.items():
        # "@" marks fields whose recorded value is an id: the recording's own id there.
        text = text.replace('"agentId":"@"', '"agentId":"{{AGENT}}"')
        text = text.replace('"activeRunId":"@"', '"activeRunId":"{{RUN}}"')
        text = text.replace('"requestId":"@"', '"requestId":"{{REQUEST}}"')
        templates[key] = Template(_numeric_holes(_holes_for_ids(text, ids)))
    return templates
