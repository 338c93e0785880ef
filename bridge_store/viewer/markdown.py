"""A run's transcript as Markdown, for export and ``bridge-store transcript --markdown``.

Prose stays as written (assistant text usually is Markdown already); arguments,
results and unknown messages go in code fences long enough that their content cannot
close them early.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ..types import Document

_BACKTICKS = re.compile(r"`{3,}")

HEADINGS = {"user": "User", "assistant": "Assistant", "task": "Task"}


def fenced(value: Any) -> str:
    """``value`` in a code fence: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        text, language = value, ""
    else:
        text, language = json.dumps(value, indent=2, ensure_ascii=False), "json"
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def timestamp(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _block(block: Document) -> str:
    kind = block["kind"]
    if kind in HEADINGS:
        return f"### {HEADINGS[kind]}\n\n{block['text']}"
    if kind == "thinking":
        duration = block.get("durationMs")
        took = f" ({duration / 1000:.1f} s)" if isinstance(duration, int) else ""
        quoted = "\n".join(f"> {line}" for line in block["text"].splitlines() or [""])
        return f"### Thinking{took}\n\n{quoted}"
    if kind == "tool_call":
        parts = [f"### Tool call: {block['name']} ({block['status']})"]
        if block.get("args") is not None:
            parts.append("Arguments:\n\n" + fenced(block["args"]))
        if block.get("result") is not None:
            parts.append("Result:\n\n" + fenced(block["result"]))
        return "\n\n".join(parts)
    if kind == "status":
        message = f": {block['message']}" if block.get("message") else ""
        return f"*Status {block['status']}{message}*"
    if kind == "request":
        return f"*Request {block['requestId']}*"
    if kind == "usage":
        counts = ", ".join(f"{name} {value}" for name, value in block["usage"].items())
        return f"*Usage: {counts}*"
    return f"### {block.get('label', kind)}\n\n" + fenced(block.get("value"))


def transcript_markdown(
    agent: Document | None, run: Document, blocks: list[Document], usage: dict[str, int] | None
) -> Iterator[str]:
    """The Markdown document, in pieces (each ends with a blank line)."""
    title = (agent or {}).get("name") or run["agentId"]
    yield f"# {title}: turn {run.get('turnNumber')}\n\n"
    model = run.get("model")
    facts = [
        ("Agent", f"`{run['agentId']}`"),
        ("Run", f"`{run['runId']}`"),
        ("Workspace", f"`{(agent or {}).get('cwd', '-')}`"),
        ("Status", str(run.get("status"))),
        ("Model", str(model.get("id")) if isinstance(model, dict) else "-"),
        ("Created", timestamp(run.get("createdAt"))),
        ("Ended", timestamp(run.get("endedAt"))),
    ]
    if usage:
        facts.append(("Tokens", ", ".join(f"{name} {value}" for name, value in usage.items())))
    yield "".join(f"- {name}: {value}\n" for name, value in facts) + "\n"
    for block in blocks:
        yield _block(block) + "\n\n"
