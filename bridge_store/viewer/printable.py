"""Text from the history made safe to print: no control character reaches a terminal.

Anything a tenant's writer stored (an agent's name, a prompt, a model id, a tool's
result) can hold ESC sequences that clear the screen, retitle the window or recolour
what follows, carriage returns that overwrite a line, or newlines that forge a row of
tab-separated output. Each control character (C0, DEL and C1) is shown as a visible
stand-in instead, so the text is still all there to read: its Unicode "control
picture" (ESC as U+241B, CR as U+240D, ...), or U+FFFD for C1, which has none.
"""

from __future__ import annotations

#: C0 and DEL to their control pictures (U+2400-U+2421), C1 to the replacement character.
_PICTURES: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20)},
    0x7F: "\u2421",
    **dict.fromkeys(range(0x80, 0xA0), "\ufffd"),
}
#: Multi-line text (a transcript, a Markdown export) keeps its line breaks and tabs.
_LINES = {code: shown for code, shown in _PICTURES.items() if code not in (0x09, 0x0A)}
#: A cell of a table is one line: a tab is a space, a newline its picture.
_CELL = {**_PICTURES, 0x09: " "}


def printable_lines(text: str) -> str:
    """``text`` with its newlines and tabs, every other control character shown."""
    return text.translate(_LINES)


def printable_cell(text: str) -> str:
    """``text`` as one line of one cell: tabs as spaces, every control character shown."""
    return text.translate(_CELL)
