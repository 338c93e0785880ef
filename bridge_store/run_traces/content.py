"""Text as the traces carry it: any string made safe to encode and cut to a bound, and
the content attributes (messages, tool arguments and results), bounded.

Documents hold whatever the contract accepted: lone surrogates (JSON's ``"\\ud800"``),
NUL and other controls, bidi overrides, markup, megabytes. OTLP strings must be UTF-8,
so a lone surrogate would fail the whole batch's encoding and hold the queue forever;
:func:`clean` replaces them. Everything else is kept as it is (a trace is data, and
backends escape what they show). Every string is cut at a bound: names and ids at
:data:`NAME_CHARS`, error messages at :data:`MESSAGE_CHARS`, each piece of content at
:data:`CONTENT_CHARS`, and a message list keeps its first :data:`MAX_PARTS` parts, so
no run can make a span larger than a collector takes (``gen_ai.*`` content of a run
stays under a megabyte).

Content follows the conventions' JSON shapes (``gen-ai-input-messages.json``,
``gen-ai-output-messages.json``): ``[{"role", "parts": [{"type": "text", "content"}]}]``,
thinking as ``reasoning`` parts, recorded as JSON strings. A tool call's arguments and
result are its events' values as JSON, or, cut, the start of that JSON (then no longer
JSON, which the conventions allow).
"""

from __future__ import annotations

import json
from typing import Any

from ..viewer.transcript import Text

#: Names, ids, models, tool names: longer ones are cut.
NAME_CHARS = 256
#: A run's error message (the span status' description).
MESSAGE_CHARS = 1024
#: One text part, or one tool call's arguments or result.
CONTENT_CHARS = 8192
#: Parts kept per message attribute.
MAX_PARTS = 32
#: Ends a string that was cut.
CUT = "…"


def clean(text: str, limit: int) -> str:
    """``text`` encodable as UTF-8 (lone surrogates replaced) and at most ``limit`` long."""
    if len(text) > limit:
        text = text[: limit - len(CUT)] + CUT
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def name(value: Any) -> str | None:
    """A document's name or id as an attribute: a non-empty string, cleaned; else None."""
    if not isinstance(value, str) or not value:
        return None
    return clean(value, NAME_CHARS)


def as_json(value: Any, limit: int = CONTENT_CHARS) -> str:
    """``value`` as JSON text (a string as itself), cut at ``limit``."""
    if isinstance(value, str):
        return clean(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a circular or absurdly deep value
        text = CUT
    return clean(text, limit)


def _part(block: Text) -> dict[str, str]:
    kind = "reasoning" if block.kind == "thinking" else "text"
    return {"type": kind, "content": clean(block.text, CONTENT_CHARS)}


def input_messages(blocks: list[Text]) -> str | None:
    """The prompts (user text) as ``gen_ai.input.messages``; None without any."""
    messages = [{"role": "user", "parts": [_part(block)]} for block in blocks[:MAX_PARTS]]
    return json.dumps(messages, ensure_ascii=False) if messages else None


def output_messages(blocks: list[Text], finish_reason: str) -> str | None:
    """Assistant text and thinking, in order, as one ``gen_ai.output.messages``
    message; None without any."""
    if not blocks:
        return None
    parts = [_part(block) for block in blocks[:MAX_PARTS]]
    message = {"role": "assistant", "parts": parts, "finish_reason": finish_reason}
    return json.dumps([message], ensure_ascii=False)
