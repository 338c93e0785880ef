"""The SDK messages a run's events carry, and the stored events around them.

The shapes are what the bridge of cursor-sdk 1.1.0 writes through CallStore
``runEvents.append`` (its ``run_stream_event`` envelope, snake_case message fields);
docs/viewer.md lists them with what the viewer makes of each. Every builder returns a
new dict, so a caller may keep or change what it gets.
"""

from __future__ import annotations

from typing import Any

from ..types import Document

#: The one event type the bridge stores: a streamed SDK message.
EVENT_TYPE = "run_stream_event"
#: Run statuses as the status message spells them (the run document's are lowercase).
RUNNING, FINISHED, ERROR, CANCELLED = "RUNNING", "FINISHED", "ERROR", "CANCELLED"
#: A tool call's statuses, as its ``tool_call`` messages report them.
CALL_RUNNING, CALL_COMPLETED, CALL_ERROR = "running", "completed", "error"


def stored_event(
    agent_id: str, run_id: str, seq: int, created_at: int, message: Document
) -> Document:
    """One stored event carrying ``message``, as ``runEvents.list`` returns it."""
    return {
        "runId": run_id,
        "seq": seq,
        "offset": str(seq),
        "eventType": EVENT_TYPE,
        "payload": {
            "schemaVersion": 1,
            "type": "sdk_message",
            "agentId": agent_id,
            "runId": run_id,
            "message": {**message, "agent_id": agent_id, "run_id": run_id},
        },
        "payloadRef": None,
        "idempotencyKey": None,
        "createdAt": created_at,
    }


def request(request_id: str) -> Document:
    return {"type": "request", "request_id": request_id}


def status(value: str, message: str | None = None) -> Document:
    found: Document = {"type": "status", "status": value}
    if message is not None:
        found["message"] = message
    return found


def _text(text: str) -> Document:
    return {"type": "text", "text": text}


def user(prompt: str) -> Document:
    return {"type": "user", "message": {"role": "user", "content": [_text(prompt)]}}


def assistant(text: str) -> Document:
    """One delta of the assistant's text (consecutive ones join into one answer)."""
    return {"type": "assistant", "message": {"role": "assistant", "content": [_text(text)]}}


def tool_use(call_id: str, name: str, args: Document) -> Document:
    """The assistant asking for a tool call (its ``tool_call`` messages follow)."""
    use = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    return {"type": "assistant", "message": {"role": "assistant", "content": [use]}}


def thinking(text: str) -> Document:
    return {"type": "thinking", "text": text}


def thinking_done(duration_ms: int) -> Document:
    """The final thinking event: no text, how long the model thought."""
    return {"type": "thinking", "text": "", "thinking_duration_ms": duration_ms}


def tool_call(call_id: str, name: str, state: str, args: Document, result: Any = None) -> Document:
    """A tool call's progress: ``running``, then ``completed`` or ``error`` with its result."""
    found: Document = {"type": "tool_call", "call_id": call_id, "name": name, "status": state}
    found["args"] = args
    if state != CALL_RUNNING:
        found["result"] = result
        found["truncated"] = {"args": False, "result": False}
    return found


def task(summary: str) -> Document:
    return {"type": "task", "text": summary}


def usage(counts: Document) -> Document:
    return {"type": "usage", "usage": counts}
