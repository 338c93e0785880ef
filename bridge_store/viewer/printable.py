"""Text from the history made safe to print: no control character reaches a terminal.

Anything a tenant's writer stored (an agent's name, a prompt, a model id, a tool's
result) can hold ESC sequences that clear the screen, retitle the window, write the
clipboard (OSC 52) or recolour what follows, carriage returns that overwrite a line,
newlines that forge a row of tab-separated output, bidi overrides that make a line
read as something else, and lone surrogates, which have no UTF-8 form (printing one
fails). Each is shown as a visible stand-in instead, so the text is still all there
to read: a C0 control or DEL as its Unicode "control picture" (ESC as U+241B, CR as
U+240D, ...); C1, which has none, the bidi embeddings, overrides and isolates, and
lone surrogates as the replacement character U+FFFD.

JSON for a terminal (``--json``) keeps every character instead, as JSON's own
``\\u`` escape (:func:`terminal_json`): the text parses back to exactly what was stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: U+202A-U+202E (embeddings, overrides, their end) and U+2066-U+2069 (isolates): what
#: reorders the text around it ("Trojan Source", CVE-2021-42574).
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_REPLACED = (*range(0x80, 0xA0), *BIDI_CONTROLS, *range(0xD800, 0xE000))

#: C0 and DEL to their control pictures (U+2400-U+2421), the rest to U+FFFD.
_PICTURES: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20)},
    0x7F: "\u2421",
    **dict.fromkeys(_REPLACED, "\ufffd"),
}
#: Multi-line text (a transcript, a Markdown export) keeps its line breaks and tabs.
_LINES = {code: shown for code, shown in _PICTURES.items() if code not in (0x09, 0x0A)}
#: A cell of a table is one line: a tab is a space, a newline its picture, and the
#: line and paragraph separators (line breaks to ``str.splitlines``) U+FFFD.
_CELL = {**_PICTURES, 0x09: " ", 0x2028: "\ufffd", 0x2029: "\ufffd"}
#: What JSON text may carry raw that a terminal acts on or cannot be sent (DEL, C1,
#: the bidi controls, surrogates) or that line-based readers take for a line break
#: (U+2028, U+2029); ``json.dumps`` escapes C0 itself.
_SURROGATES = re.compile("[\ud800-\udfff]")
_JSON_ESCAPED = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable_lines(text: str) -> str:
    """``text`` with its newlines and tabs, every other control character shown."""
    return text.translate(_LINES)


def printable_cell(text: str) -> str:
    """``text`` as one line of one cell: tabs as spaces, every control character shown."""
    return text.translate(_CELL)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, each lone surrogate (which has no UTF-8 form) as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text).encode("utf-8")


def terminal_json(value: Any, *, allow_nan: bool = True) -> str:
    """``value`` as compact JSON on one line: non-ASCII text as it is (readable), but
    DEL, C1, the bidi controls, lone surrogates and the line and paragraph separators
    as ``\\u`` escapes, so the line is valid JSON that parses back to the same value,
    is one line to any reader and acts on no terminal. ``allow_nan`` as for
    ``json.dumps``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
    # Those characters occur only inside JSON strings, where an escape means the same.
    return _JSON_ESCAPED.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
