"""A run's transcript as Markdown a team pastes: for export and ``transcript --markdown``.

Prose stays as written (assistant text usually is Markdown already), made safe to
paste (:mod:`.markdown_safe`: no raw HTML, no script links). Tool calls fold into
``<details>``: their arguments and result in code fences long enough that their
content cannot close them early, a result past :data:`RESULT_CHARS` cut with a count
of what was cut (the JSON lines export and the viewer keep it whole). The run's token
usage is a small table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ..types import Document
from .markdown_safe import code_span, html_text, inline, prose
from .printable import printable_lines
from .templating import error_text, token_label
from .times import shown_duration, shown_utc

_BACKTICKS = re.compile(r"`{3,}")

HEADINGS = {"user": "User", "assistant": "Assistant", "task": "Task"}
#: Arguments and results longer than these are cut in the export.
ARGS_CHARS = 2_000
RESULT_CHARS = 4_000


def fenced(value: Any) -> str:
    """``value`` in a code fence: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        text, language = value, ""
    else:
        text, language = json.dumps(value, indent=2, ensure_ascii=False), "json"
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def cut(value: Any, limit: int) -> tuple[Any, str]:
    """``value`` shown (a string cut at ``limit`` characters, or as it is), and a note
    saying what was cut ("" when nothing was)."""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) <= limit:
        return value, ""
    lines = text.count("\n") + 1
    note = (
        f"*{len(text) - limit:,} more characters cut ({len(text):,} characters, "
        f"{lines:,} lines in all; the JSON lines export has the whole).*"
    )
    return text[:limit], note


def usage_table(usage: dict[str, int]) -> str:
    names = list(usage)
    head = "| " + " | ".join(token_label(name) for name in names) + " |"
    rule = "|" + "|".join("---:" for _ in names) + "|"
    row = "| " + " | ".join(f"{value:,}" for value in usage.values()) + " |"
    return f"{head}\n{rule}\n{row}"


def _tool_call(block: Document) -> str:
    took = f", {shown_duration(block['durationMs'])}" if block.get("durationMs") is not None else ""
    summary = f"Tool call: {block['name']} ({block['status']}{took})"
    parts = [f"<details>\n<summary>{html_text(summary)}</summary>"]
    for field, title, limit in (
        ("args", "Arguments", ARGS_CHARS),
        ("result", "Result", RESULT_CHARS),
    ):
        if block.get(field) is None:
            continue
        shown, note = cut(block[field], limit)
        parts.append(f"{title}:\n\n{fenced(shown)}" + (f"\n\n{note}" if note else ""))
    parts.append("</details>")
    return "\n\n".join(parts)


def _block(block: Document) -> str:
    kind = block["kind"]
    if kind in HEADINGS:
        return f"### {HEADINGS[kind]}\n\n{prose(block['text'])}"
    if kind == "thinking":
        duration_ms = block.get("durationMs")
        took = f" ({shown_duration(duration_ms)})" if duration_ms is not None else ""
        quoted = "\n".join(f"> {line}" for line in prose(block["text"]).splitlines() or [""])
        return f"### Thinking{took}\n\n{quoted}"
    if kind == "tool_call":
        return _tool_call(block)
    if kind == "status":
        message = f": {inline(error_text(block['message']))}" if block.get("message") else ""
        return f"*Status {inline(block['status'])}{message}*"
    if kind == "request":
        return f"*Request {code_span(block['requestId'])}*"
    if kind == "usage":
        counts = ", ".join(
            f"{token_label(name).lower()} {value:,}" for name, value in block["usage"].items()
        )
        return f"*Tokens reported: {counts}*"
    shown, note = cut(block.get("value"), RESULT_CHARS)
    label = inline(str(block.get("label", kind)))
    return f"### {label}\n\n" + fenced(shown) + (f"\n\n{note}" if note else "")


def transcript_markdown(
    agent: Document | None, run: Document, blocks: list[Document], usage: dict[str, int] | None
) -> Iterator[str]:
    """The Markdown document, in pieces (each ends with a blank line); no control
    character but its newlines and tabs, so printed or ``cat`` to a terminal it is text."""
    return map(printable_lines, _pieces(agent, run, blocks, usage))


def _pieces(
    agent: Document | None, run: Document, blocks: list[Document], usage: dict[str, int] | None
) -> Iterator[str]:
    title = (agent or {}).get("displayName") or (agent or {}).get("name") or run["agentId"]
    yield f"# {inline(str(title))}: turn {inline(str(run.get('turnNumber')))}\n\n"
    model = run.get("model")
    facts = [
        ("Agent", code_span(run["agentId"])),
        ("Run", code_span(run["runId"])),
        ("Workspace", code_span((agent or {}).get("cwd", "-"))),
        ("Status", inline(str(run.get("status")))),
        ("Model", inline(str(model.get("id"))) if isinstance(model, dict) else "-"),
        ("Created", shown_utc(run.get("createdAt"))),
        ("Ended", shown_utc(run.get("endedAt"))),
    ]
    if run.get("createdBy"):
        facts.append(("Started by", inline(run["createdBy"])))
    if run.get("error") is not None:
        facts.append(("Error", inline(error_text(run["error"]))))
    yield "".join(f"- {name}: {value}\n" for name, value in facts) + "\n"
    if usage:
        yield f"Token usage:\n\n{usage_table(usage)}\n\n"
    for block in blocks:
        yield _block(block) + "\n\n"
