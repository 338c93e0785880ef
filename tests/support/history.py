"""Synthetic agent history holding every run event type of ``shared/EVENTS.md``.

The offline stand-in Cursor API never lets a real run produce assistant text, thinking
or tool calls, so viewer tests store these through CallStore ``runEvents.append``,
exactly as the bridge would. :func:`history_calls` is the list of CallStore calls;
apply it with any client.
"""

from __future__ import annotations

from typing import Any

T0 = 1_780_000_000_000  # 2026-05-28, fixed so pages and exports are deterministic

LOGIN_AGENT = "agent-login"
DOCS_AGENT = "agent-docs"
ARCHIVED_AGENT = "agent-archived"
FINISHED_RUN = "run-login-1"
FAILED_RUN = "run-login-2"
LIVE_RUN = "run-docs-1"
PROMPT = "Fix the login redirect"
ANSWER = "Done: the redirect now keeps the next parameter."
LONG_RESULT_LINES = 400  # a file read whose result is far past the page's preview
USAGE = {
    "inputTokens": 1200,
    "outputTokens": 340,
    "cacheReadTokens": 800,
    "cacheWriteTokens": 16,
    "totalTokens": 1556,
}

Call = tuple[str, str, dict[str, Any]]


def agent(agent_id: str, name: str, cwd: str, status: str, updated_at: int) -> dict[str, Any]:
    return {
        "agentId": agent_id,
        "cwd": cwd,
        "name": name,
        "status": status,
        "activeRunId": None,
        "latestCheckpoint": None,
        "sdkMetadata": {"blobEncryptionKey": "ab" * 32},
        "createdAt": T0,
        "updatedAt": updated_at,
    }


def run(agent_id: str, run_id: str, turn: int, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "runId": run_id,
        "agentId": agent_id,
        "requestId": f"req-{run_id}",
        "turnNumber": turn,
        "status": status,
        "model": {"id": "composer-2"},
        "result": None,
        "error": None,
        "usageRef": None,
        "usage": None,
        "createdAt": T0 + turn * 60_000,
        "updatedAt": T0 + turn * 60_000,
        "startedAt": T0 + turn * 60_000,
        "endedAt": None,
        "startCheckpointRef": None,
        "latestCheckpointRef": None,
        **extra,
    }


def message(agent_id: str, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """runEvents.append input carrying one SDK message, as the bridge stores it."""
    return {
        "runId": run_id,
        "eventType": "run_stream_event",
        "payload": {
            "schemaVersion": 1,
            "type": "sdk_message",
            "agentId": agent_id,
            "runId": run_id,
            "message": {**body, "agent_id": agent_id, "run_id": run_id},
        },
    }


def long_result() -> str:
    return "\n".join(f"{n:4} | line {n} of routes/login.py" for n in range(LONG_RESULT_LINES))


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def finished_run_messages() -> list[dict[str, Any]]:
    """One of every message type, in the order a real turn sends them."""
    return [
        {"type": "request", "request_id": "req-login-1"},
        {"type": "status", "status": "RUNNING"},
        {"type": "user", "message": {"role": "user", "content": [text(PROMPT)]}},
        {"type": "thinking", "text": "Looking at"},
        {"type": "thinking", "text": " the router first."},
        {"type": "thinking", "text": "", "thinking_duration_ms": 1500},
        {"type": "assistant", "message": {"role": "assistant", "content": [text("I'll read")]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [text(" the router.")]}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call-read",
                        "name": "read_file",
                        "input": {"path": "routes/login.py"},
                    }
                ],
            },
        },
        {
            "type": "tool_call",
            "call_id": "call-read",
            "name": "read_file",
            "status": "running",
            "args": {"path": "routes/login.py"},
        },
        {
            "type": "tool_call",
            "call_id": "call-read",
            "name": "read_file",
            "status": "completed",
            "args": {"path": "routes/login.py"},
            "result": long_result(),
            "truncated": {"args": False, "result": False},
        },
        {
            "type": "tool_call",
            "call_id": "call-test",
            "name": "run_terminal_cmd",
            "status": "error",
            "args": {"command": "pytest -q tests/test_login.py"},
            "result": "1 failed: test_redirect_keeps_next",
        },
        {"type": "task", "text": "Fixed the redirect and its test"},
        {"type": "usage", "usage": USAGE},
        {"type": "assistant", "message": {"role": "assistant", "content": [text(ANSWER)]}},
        {"type": "system", "subtype": "init", "tools": ["read_file"]},
        {"type": "status", "status": "FINISHED"},
    ]


def history_calls() -> list[Call]:
    """Three agents (one archived), a finished run, a failed run and a live run."""
    calls: list[Call] = [
        (
            "agents",
            "create",
            {"agent": agent(ARCHIVED_AGENT, "old spike", "/src/app", "archived", T0 + 1)},
        ),
        (
            "agents",
            "create",
            {"agent": agent(LOGIN_AGENT, "fix login", "/src/app", "idle", T0 + 3)},
        ),
        (
            "agents",
            "create",
            {"agent": agent(DOCS_AGENT, "write docs", "/src/docs", "running", T0 + 2)},
        ),
        (
            "runs",
            "create",
            {
                "run": run(
                    LOGIN_AGENT,
                    FINISHED_RUN,
                    1,
                    "finished",
                    usage=USAGE,
                    endedAt=T0 + 60_000 + 83_500,
                )
            },
        ),
        (
            "runs",
            "create",
            {
                "run": run(
                    LOGIN_AGENT,
                    FAILED_RUN,
                    2,
                    "error",
                    error={"message": "[permission_denied] HTTP 403"},
                    endedAt=T0 + 120_000 + 900,
                )
            },
        ),
        ("runs", "create", {"run": run(DOCS_AGENT, LIVE_RUN, 1, "running")}),
    ]
    for body in finished_run_messages():
        calls.append(("runEvents", "append", message(LOGIN_AGENT, FINISHED_RUN, body)))
    for body in (
        {"type": "request", "request_id": "req-login-2"},
        {"type": "status", "status": "RUNNING"},
        {"type": "status", "status": "ERROR", "message": "[permission_denied] HTTP 403"},
    ):
        calls.append(("runEvents", "append", message(LOGIN_AGENT, FAILED_RUN, body)))
    for body in (
        {"type": "request", "request_id": "req-docs-1"},
        {"type": "status", "status": "RUNNING"},
        {
            "type": "user",
            "message": {"role": "user", "content": [text("Document the CLI")]},
        },
    ):
        calls.append(("runEvents", "append", message(DOCS_AGENT, LIVE_RUN, body)))
    return calls


def live_run_ending() -> list[Call]:
    """What the live run appends and writes to end (a follower must see all of it)."""
    calls: list[Call] = [
        (
            "runEvents",
            "append",
            message(
                DOCS_AGENT,
                LIVE_RUN,
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [text("The CLI has five commands.")],
                    },
                },
            ),
        ),
        (
            "runEvents",
            "append",
            message(DOCS_AGENT, LIVE_RUN, {"type": "status", "status": "FINISHED"}),
        ),
        ("runs", "update", {"run": run(DOCS_AGENT, LIVE_RUN, 1, "finished", endedAt=T0 + 70_000)}),
    ]
    return calls
