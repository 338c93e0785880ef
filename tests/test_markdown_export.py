"""The Markdown export is safe to paste: hostile names and text stay text.

An agent's name, its prompt and answers, a tool's name, arguments and result, a status
message and a workspace path all carry the classic attacks (``<script>``,
``<img onerror>``, ``javascript:`` links and reference definitions, raw HTML that
closes the export's own ``<details>``, backticks that would end a code span). The
export is rendered by a CommonMark renderer that lets raw HTML through (the most
permissive kind a paste can land in): nothing executable may come out, and every
hostile string must still be shown.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from markdown_it import MarkdownIt

from bridge_store.viewer.markdown import transcript_markdown
from bridge_store.viewer.markdown_safe import code_span, inline, prose
from bridge_store.viewer.transcript import TranscriptBuilder

from .support.history import LOGIN_AGENT, USAGE, message, run, text

SCRIPT = "<script>alert(1)</script>"
IMAGE = '<img src=x onerror="alert(2)">'
LINK = "[click me](javascript:alert(3))"
LINK_SPACED = "[again]( JaVaScRiPt:alert(4))"
LINK_ANGLE = "[angle](<javascript:alert(5)>)"
DEFINITION = "[ref]: javascript:alert(6)"
DATA = "[data](data:text/html;base64,PHNjcmlwdD4=)"
AUTOLINK = "<javascript:alert(7)>"
CLOSER = "</details><script>alert(8)</script>"
HOSTILE = [SCRIPT, IMAGE, LINK, LINK_SPACED, LINK_ANGLE, DATA, AUTOLINK, CLOSER]


def events() -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = [
        {"type": "user", "message": {"content": [text(f"Please {SCRIPT} and {IMAGE}")]}},
        {
            "type": "assistant",
            "message": {
                "content": [
                    text(f"See {LINK}, {LINK_SPACED}, {LINK_ANGLE}, {DATA} or {AUTOLINK}.\n\n"),
                    text(f"{DEFINITION}\n\nUse [ref] and `a < b` and\n```html\n{SCRIPT}\n```\n"),
                ]
            },
        },
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": f"tool{SCRIPT}",
            "status": "completed",
            "args": {"html": IMAGE},
            "result": f"{CLOSER}\n```\n{SCRIPT}",
        },
        {"type": "status", "status": f"ERROR{IMAGE}", "message": f"failed: {SCRIPT} {LINK}"},
        {"type": "task", "text": DEFINITION},
        {"type": "usage", "usage": USAGE},
    ]
    return [
        {**message(LOGIN_AGENT, "run-x", body), "seq": n, "offset": str(n), "createdAt": n}
        for n, body in enumerate(bodies, start=1)
    ]


def export() -> str:
    builder = TranscriptBuilder().extend(events())
    agent = {"name": f"agent {SCRIPT}", "cwd": f"/w/`{SCRIPT}`"}
    doc = run(LOGIN_AGENT, "run-x", 1, "error", error={"message": IMAGE}, createdBy=SCRIPT)
    return "".join(transcript_markdown(agent, doc, builder.json(), builder.usage))


def rendered(markdown: str) -> str:
    html: str = MarkdownIt("commonmark", {"html": True}).render(markdown)
    return html


def test_nothing_hostile_survives_a_renderer_that_passes_raw_html() -> None:
    html = rendered(export())
    # The export's own <details> and <summary> are the only tags raw HTML made.
    raw_tags = set(re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", html))
    allowed = {"h1", "h3", "p", "ul", "li", "code", "pre", "details", "summary", "em", "table"}
    allowed |= {f"/{tag}" for tag in allowed}
    assert {"script", "img", "/script"} & raw_tags == set()
    assert raw_tags <= allowed | {"blockquote", "/blockquote", "strong", "/strong", "a", "/a"}
    # No element has an event handler (shown as text, "onerror" is harmless).
    for tag in re.findall(r"<[a-zA-Z][^>]*>", html):
        assert not re.search(r"\son[a-z]+\s*=", tag, re.IGNORECASE), tag
    for href in re.findall(r'href="([^"]*)"', html):
        assert not re.match(r"\s*(javascript|vbscript|data|file):", href, re.IGNORECASE), href
    # The tool result's </details> stayed inside its code block.
    assert html.count("<details>") == html.count("</details>") == 1


def test_every_hostile_string_is_still_shown() -> None:
    html = rendered(export())
    shown = re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")
    shown = shown.replace("&quot;", '"').replace("&amp;", "&").replace("\\", "")
    for hostile in (SCRIPT, IMAGE, "javascript:alert(3)", "JaVaScRiPt:alert(4)", "alert(6)"):
        assert hostile in shown, hostile


@pytest.mark.parametrize(
    ("given", "safe"),
    [
        (SCRIPT, "&lt;script>alert(1)&lt;/script>"),
        (LINK, "[click me]\\(javascript:alert(3))"),
        (DEFINITION, "\\[ref]: javascript:alert(6)"),
        ("AT&T <b>", "AT&amp;T &lt;b>"),
        ("keep `<b>` and\n```\n<b>\n```\n", "keep `<b>` and\n```\n<b>\n```\n"),
        ("**bold** _it_ [ok](https://example.com)", "**bold** _it_ [ok](https://example.com)"),
    ],
)
def test_prose_keeps_markdown_and_code_but_no_html_or_script_links(given: str, safe: str) -> None:
    assert prose(given) == safe


def test_names_and_code_spans_are_read_as_nothing() -> None:
    assert inline("a <b> [c](javascript:d) *e*\nf") == (
        "a &lt;b&gt; \\[c\\]\\(javascript:d\\) \\*e\\* f"
    )
    assert code_span("x``y") == "```x``y```"
    assert code_span("`start") == "`` `start ``"
