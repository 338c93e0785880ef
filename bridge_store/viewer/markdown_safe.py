"""Text an agent wrote, made safe to paste as Markdown: no raw HTML, no script links.

A Markdown export is pasted into issues, wikis and chats whose renderers differ in what
HTML they let through; an agent's text (or a name, a result) may hold ``<script>``,
``<img src=x onerror=...>`` or ``[click](javascript:...)``, written by the model or
planted in a file it read. What it holds is kept, as text:

- :func:`prose` for text that is Markdown already (prompts, answers): outside code
  spans and fenced blocks (which renderers show literally), ``&`` and ``<`` become
  entities, so no tag or autolink starts there, and a link or reference definition to
  a ``javascript:``, ``vbscript:``, ``data:`` or ``file:`` address loses its link
  syntax (``]\\(``); everything else (emphasis, lists, code) stays as written.
- :func:`inline` for a name or a label on one line (a heading, a list item): every
  character Markdown or HTML would read is escaped, and line breaks become spaces.
- :func:`html_text` inside an HTML element (``<summary>``).
- :func:`code_span` for a value shown as code on one line.
"""

from __future__ import annotations

import html
import re

#: Schemes a pasted link must never carry.
_UNSAFE_LINK = re.compile(r"\]\(\s*<?\s*(?=(?:javascript|vbscript|data|file)\s*:)", re.IGNORECASE)
_UNSAFE_DEFINITION = re.compile(
    r"^(\s{0,3})\[([^\]\n]*)\]:(?=\s*<?\s*(?:javascript|vbscript|data|file)\s*:)",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*$", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
#: What :func:`inline` escapes: Markdown's punctuation and HTML's.
_INLINE_SPECIALS = re.compile(r"([\\`*_\[\]()#+!|~>-])")


def _outside_code(text: str) -> str:
    """Escape one stretch of prose with no code in it."""
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    text = _UNSAFE_DEFINITION.sub(lambda m: f"{m[1]}\\[{m[2]}]:", text)
    return _UNSAFE_LINK.sub("]\\\\(", text)


def _spans(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, is code): fenced blocks and backtick code spans."""
    pieces: list[tuple[str, bool]] = []
    at = 0
    plain_from = 0
    while at < len(text):
        fence = _FENCE.match(text, at) if at == 0 or text[at - 1] == "\n" else None
        if fence is not None:
            marker = fence[2]
            closing = re.compile(
                rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$", re.MULTILINE
            )
            end_match = closing.search(text, fence.end())
            end = end_match.end() if end_match is not None else len(text)
            pieces.append((text[plain_from:at], False))
            pieces.append((text[at:end], True))
            at = plain_from = end
            continue
        if text[at] == "`":
            run = _BACKTICKS.match(text, at)
            assert run is not None
            ticks = run[0]
            close = re.compile(rf"(?<!`){ticks}(?!`)")
            found = close.search(text, run.end())
            if found is not None:
                pieces.append((text[plain_from:at], False))
                pieces.append((text[at : found.end()], True))
                at = plain_from = found.end()
                continue
            at = run.end()
            continue
        at += 1
    pieces.append((text[plain_from:], False))
    return [(piece, code) for piece, code in pieces if piece]


def prose(text: str) -> str:
    """Markdown an agent wrote, kept as Markdown, with no raw HTML and no script links."""
    return "".join(piece if code else _outside_code(piece) for piece, code in _spans(text))


def inline(text: str) -> str:
    """A name or label for one line of Markdown: shown exactly as it is, read as nothing."""
    one_line = " ".join(str(text).split())
    return _INLINE_SPECIALS.sub(r"\\\1", html.escape(one_line, quote=False))


def html_text(text: str) -> str:
    """Text inside an HTML element of the export (a ``<summary>``)."""
    return html.escape(" ".join(str(text).split()))


def code_span(text: str) -> str:
    """``text`` as inline code that nothing in it can end early."""
    one_line = " ".join(str(text).split())
    longest = max((len(run) for run in _BACKTICKS.findall(one_line)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{ticks}{pad}{one_line}{pad}{ticks}"
