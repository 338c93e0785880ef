"""Hostile values for the tests that attack the wire, the contract and the readers.

Cursors a client could forge (tests/test_contract.py, tests/test_fuzz.py); numbers at
every boundary, edge-case text and arbitrary JSON values (the fuzzers); and the
hypothesis strategies of documents CallStore accepts at the contract's edges, with the
text a writer can put in them (tests/test_readers_fuzz.py).
"""

from __future__ import annotations

import base64
import itertools
import json

from hypothesis import strategies as st

from bridge_store.wire.fields import (
    MAX_CURSOR_LENGTH,
    MAX_CWD_BYTES,
    MAX_KEY_BYTES,
    MAX_LIMIT,
    MAX_SAFE_INTEGER,
)


def _b64(raw: str | bytes) -> str:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


#: For each listing kind: nesting that would exhaust a recursive parser, integers
#: outside 64 bits or outside a double (in the JSON form cursors had before, too), ids
#: the contract refuses, bytes that are not UTF-8, and sheer length.
HOSTILE_CURSORS: dict[str, list[str]] = {
    kind: [
        _b64("[" * 3000),
        *(
            _b64(json.dumps([kind, big, *["a"] * arity]))
            for big in (2**63, -(2**63) - 1, 10**30, 1e308)
            for arity in (1, 2)
        ),
        _b64(f"{kind}\x00{2**63}\x00a\x00b"),
        _b64(f"{kind}\x00{-(2**63) - 1}\x00a\x00b"),
        _b64(f"{kind}\x00{10**30}\x00a\x00b"),
        _b64(f"{kind}\x001e308\x00a\x00b"),
        _b64(f"{kind}\x00{2**53 + 1}\x00a\x00b"),
        _b64(f"{kind}\x007\x00{'a' * (MAX_KEY_BYTES + 1)}\x00b"),
        _b64(f"{kind}\x00\x00\x00"),
        _b64(f"{kind}\x00\ud83d\x00a\x00b"),
        _b64(b"\xff\xfe\x00\x01"),
        "A" * (MAX_CURSOR_LENGTH + 1),
        "é",
        "=",
    ]
    for kind in ("agents", "runs", "checkpoints")
}


# -- values (tests/test_fuzz.py) ------------------------------------------------------

BOUNDARY_NUMBERS: list[int | float] = [
    0,
    -0.0,
    1,
    -1,
    0.5,
    1e-7,
    5e-324,
    2**31,
    2**32,
    MAX_LIMIT,
    MAX_LIMIT + 1,
    MAX_SAFE_INTEGER - 1,
    MAX_SAFE_INTEGER,
    MAX_SAFE_INTEGER + 1,
    -MAX_SAFE_INTEGER,
    -MAX_SAFE_INTEGER - 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**30,
    -(10**30),
    1e16,
    1e308,
    -1e308,
    float(MAX_SAFE_INTEGER),
]

EDGE_TEXT: list[str] = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "x\ud83d",
    "\ud83d\ude80",
    "\ufeff",
    "\u202e",
    "\u0301",
    "\uffff",
    "\U0010ffff",
    "/",
    "..",
    "%00",
    "\\",
    '"',
    "a" * MAX_KEY_BYTES,
    "a" * (MAX_KEY_BYTES + 1),
    "é" * (MAX_KEY_BYTES // 2 + 1),
    "/" * (MAX_CWD_BYTES + 1),
    "0",
    "-1",
    "9" * 20,
    *itertools.chain.from_iterable(HOSTILE_CURSORS.values()),
]

HOSTILE = list(itertools.chain.from_iterable(HOSTILE_CURSORS.values()))

numbers = st.one_of(
    st.sampled_from(BOUNDARY_NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
texts = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=40))
json_leaves = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(texts, st.sampled_from(["agentId", "cursor", "limit"])), children, max_size=4
        ),
    ),
    max_leaves=6,
)


# -- documents CallStore accepts, at the contract's edges (tests/test_readers_fuzz.py) --

#: What a writer can put in any text: ESC sequences (retitle, clear, OSC 52 clipboard
#: write, a hyperlink), C1 (U+009B is CSI), DEL, line tricks, bidi overrides and
#: isolates, HTML, Rich markup, Markdown that links, fences and folds, lone
#: surrogates (JSON's \ud800), and the ordinary.
HOSTILE_TEXT: list[str] = [
    "\x1b]0;owned\x07",
    "\x1b[2J\x1b[H",
    "\x1b]52;c;cm0gLXJmIH4=\x07",
    "\x1b]8;;https://attacker.example\x1b\\link\x1b]8;;\x1b\\",
    "\x9b31m\x85\x8d\x90\x9c\x9d\x9e\x9f",
    "\x7f",
    "\r\nforged\tcell",
    "\u202eevil\u202c",
    "\u2066isolated\u2069",
    "\u200f\u2028\u2029",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "\"'><&amp;",
    "[link=https://attacker.example]click[/link]",
    "[/bold] x",
    "[bold",
    "\\",
    "[x](javascript:alert(1))",
    "```",
    "</details><details open>",
    "| a | b |\n|---|---|",
    "\ud800",
    "x\udfffy",
    "\ufeff\U0010ffff\u00e9\U0001d54f",
    "",
    " ",
    "wombat",
]
#: A mebibyte of it, for the fields a page, a row or a hit shows.
MEBIBYTE_TEXT: list[str] = ["w" * (1 << 20), ("wombat " + HOSTILE_TEXT[0]) * ((1 << 20) // 20)]

#: The contract's times: any integer within 2^53 of zero. Milliseconds now, seconds,
#: microseconds by mistake, the contract's bounds, the calendar's bounds (years 1 and
#: 9999) and one past each, and the epoch.
EDGE_TIMES: list[int] = [
    0,
    1,
    -1,
    1_780_000_000,
    1_780_000_000_000,
    1_780_000_000_000_000,
    MAX_SAFE_INTEGER,
    MAX_SAFE_INTEGER - 1,
    -MAX_SAFE_INTEGER,
    253_402_300_799_999,
    253_402_300_800_000,
    -62_135_596_800_000,
    -62_135_596_800_001,
]

hostile_texts = st.one_of(
    st.sampled_from(HOSTILE_TEXT),
    st.sampled_from(EDGE_TEXT),
    st.lists(st.sampled_from(HOSTILE_TEXT), min_size=2, max_size=4).map("".join),
    st.text(max_size=20),
)
#: Mostly short, now and then a mebibyte.
any_texts = st.one_of(hostile_texts, hostile_texts, hostile_texts, st.sampled_from(MEBIBYTE_TEXT))
times = st.one_of(st.sampled_from(EDGE_TIMES), st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER))


def _storable(text: str, max_bytes: int) -> bool:
    return "\x00" not in text and len(text.encode("utf-8", "surrogatepass")) <= max_bytes


#: Ids and workspaces: any text a key can be (no NUL, no lone surrogate), controls
#: and markup included.
keys = st.one_of(
    st.sampled_from([text for text in HOSTILE_TEXT if text.strip()]),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=30),
).filter(lambda text: bool(text) and _storable(text, MAX_KEY_BYTES))
workspaces = st.one_of(keys, st.just("/" * MAX_CWD_BYTES)).filter(
    lambda text: _storable(text, MAX_CWD_BYTES)
)
maybe = st.none
STATUSES = ["idle", "running", "finished", "error", "cancelled", "expired", "archived", "queued"]
statuses = st.one_of(maybe(), st.sampled_from(STATUSES), hostile_texts)
#: Fields no part of the contract names, kept as they are.
extras = st.dictionaries(
    st.sampled_from(["extra", "notes", "x\x1b[2J", "<b>"]), json_values, max_size=2
)
usages = st.one_of(
    maybe(),
    st.dictionaries(
        st.sampled_from(
            ["inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "totalTokens"]
        ),
        st.one_of(numbers, json_values),
        max_size=5,
    ),
    st.dictionaries(st.text(max_size=5), json_values, max_size=3),
)
models = st.one_of(
    maybe(),
    st.fixed_dictionaries({"id": st.one_of(hostile_texts, json_values)}),
    st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)


@st.composite
def agent_documents(draw: st.DrawFn, agent_id: str) -> dict[str, object]:
    doc: dict[str, object] = {
        **draw(extras),
        "agentId": agent_id,
        "cwd": draw(workspaces),
        "updatedAt": draw(times),
    }
    for field, values in (
        ("createdAt", st.one_of(maybe(), times)),
        ("name", st.one_of(maybe(), any_texts)),
        ("status", statuses),
        ("activeRunId", st.one_of(maybe(), keys)),
    ):
        if draw(st.booleans()):
            doc[field] = draw(values)
    return doc


@st.composite
def run_documents(draw: st.DrawFn, agent_id: str, run_id: str) -> dict[str, object]:
    doc: dict[str, object] = {
        **draw(extras),
        "runId": run_id,
        "agentId": agent_id,
        "turnNumber": draw(st.one_of(st.integers(0, 3), times)),
    }
    for field, values in (
        ("status", statuses),
        ("requestId", st.one_of(maybe(), hostile_texts)),
        ("model", models),
        ("usage", usages),
        ("error", st.one_of(maybe(), any_texts, json_values)),
        ("result", json_values),
        ("createdAt", st.one_of(maybe(), times)),
        ("updatedAt", st.one_of(maybe(), times)),
        ("startedAt", st.one_of(maybe(), times)),
        ("endedAt", st.one_of(maybe(), times)),
    ):
        if draw(st.booleans()):
            doc[field] = draw(values)
    return doc


def _message_bodies(text: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, object]]:
    """SDK messages of every type EVENTS.md names (and one it does not), each field a
    hostile text or any JSON value."""
    value = st.one_of(text, json_values)
    content = st.one_of(
        text,
        st.lists(
            st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": value}),
                st.fixed_dictionaries(
                    {"type": st.just("tool_use"), "id": text, "name": value, "input": value}
                ),
                json_values,
            ),
            max_size=2,
        ),
    )
    said = st.fixed_dictionaries({"content": content})
    return st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["user", "assistant"]), "message": said}),
        st.fixed_dictionaries(
            {"type": st.just("thinking"), "text": value},
            optional={"thinking_duration_ms": st.one_of(times, json_values)},
        ),
        st.fixed_dictionaries(
            {"type": st.just("tool_call"), "call_id": st.one_of(st.just("c"), value)},
            optional={
                "name": value,
                "status": st.one_of(st.sampled_from(["running", "completed", "error"]), value),
                "args": value,
                "result": value,
                "truncated": value,
            },
        ),
        st.fixed_dictionaries(
            {"type": st.just("status"), "status": value}, optional={"message": value}
        ),
        st.fixed_dictionaries({"type": st.just("request"), "request_id": value}),
        st.fixed_dictionaries({"type": st.just("usage"), "usage": st.one_of(usages, value)}),
        st.fixed_dictionaries({"type": st.just("task"), "text": value}),
        st.fixed_dictionaries({"type": text}, optional={"value": value}),
    )


@st.composite
def event_inputs(draw: st.DrawFn, run_id: str) -> dict[str, object]:
    """runEvents.append input: mostly an SDK message as the bridge stores it, sometimes
    any payload under any event type."""
    if draw(st.integers(0, 4)):
        body = draw(_message_bodies(any_texts))
        payload: object = {"schemaVersion": 1, "type": "sdk_message", "message": body}
        event_type = "run_stream_event"
    else:
        payload, event_type = draw(json_values), draw(keys)
    return {"runId": run_id, "eventType": event_type, "payload": payload, **draw(extras)}
