"""A run's outline: every step of a long run on one page, with jumps to its first error
and its end, each step linking to the transcript at that step.

Made from the same blocks as the transcript (the whole run read once, a thousand
events at a time): prompts, answers, tool calls (with how long each took), tasks,
status changes and usage; thinking and requests are left out. A step failed when it is
a status of ``ERROR``, ``CANCELLED`` or ``EXPIRED`` or a tool call that ended in
``error``; the first such is the "first error" jump.
"""

from __future__ import annotations

from ..types import Document
from .templating import error_text
from .times import shown_duration
from .transcript import TranscriptBuilder

SNIPPET_CHARS = 100
FAILED_STATUSES = frozenset({"error", "cancelled", "expired"})
LEFT_OUT = frozenset({"thinking", "request"})


def _snippet(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def _label(block: Document) -> tuple[str, bool]:
    kind = block["kind"]
    if kind == "user":
        return f"Prompt: {_snippet(block['text'])}", False
    if kind == "assistant":
        return f"Answer: {_snippet(block['text'])}", False
    if kind == "task":
        return f"Task: {_snippet(block['text'])}", False
    if kind == "tool_call":
        took_ms = block.get("durationMs")
        took = f", {shown_duration(took_ms)}" if took_ms is not None else ""
        return f"{block['name']} ({block['status']}{took})", block["status"] == "error"
    if kind == "status":
        said = f": {_snippet(error_text(block['message']))}" if block.get("message") else ""
        return f"Status {block['status']}{said}", block["status"].lower() in FAILED_STATUSES
    if kind == "usage":
        total = block["usage"].get("totalTokens", sum(block["usage"].values()))
        return f"Tokens reported: {total:,}", False
    return f"{block.get('label', kind)}", False


def outline(builder: TranscriptBuilder) -> Document:
    """The steps of a run whose events ``builder`` folded, and its two jumps."""
    steps = []
    for block in builder.json():
        if block["kind"] in LEFT_OUT:
            continue
        label, failed = _label(block)
        steps.append(
            {
                "key": block["key"],
                "kind": block["kind"],
                "seq": block["seqs"][0],
                "at": block["at"],
                "label": label,
                "failed": failed,
            }
        )
    first_error = next((step for step in steps if step["failed"]), None)
    return {"steps": steps, "firstError": first_error, "end": steps[-1] if steps else None}
