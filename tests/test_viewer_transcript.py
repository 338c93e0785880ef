"""The transcript model: events of every type folded into the blocks a person reads."""

from __future__ import annotations

from typing import Any

from bridge_store.viewer.markdown import fenced, transcript_markdown
from bridge_store.viewer.transcript import Other, Text, ToolCall, TranscriptBuilder, build

from .support.history import (
    ANSWER,
    FINISHED_RUN,
    LOGIN_AGENT,
    PROMPT,
    USAGE,
    finished_run_messages,
    long_result,
    message,
    run,
)


def stored(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as the store hands them back: appended inputs with seq and offset."""
    events = []
    for seq, body in enumerate(bodies, start=1):
        event = message(LOGIN_AGENT, FINISHED_RUN, body)
        events.append({"seq": seq, "offset": str(seq), **event, "createdAt": seq})
    return events


def kinds(builder: TranscriptBuilder) -> list[str]:
    return [block.kind for block in builder.blocks]


def test_every_message_type_becomes_a_block_in_order() -> None:
    transcript = build(stored(finished_run_messages()))
    assert kinds(transcript) == [
        "request",
        "status",
        "user",
        "thinking",
        "assistant",
        "tool_call",
        "tool_call",
        "task",
        "usage",
        "assistant",
        "other",
        "status",
    ]
    user, thinking, first_answer = transcript.blocks[2:5]
    assert isinstance(user, Text)
    assert user.text == PROMPT
    # Deltas joined; the empty closing event carries the duration.
    assert isinstance(thinking, Text)
    assert (thinking.text, thinking.duration_ms, thinking.seqs) == (
        "Looking at the router first.",
        1500,
        [4, 5, 6],
    )
    assert isinstance(first_answer, Text)
    assert first_answer.text == "I'll read the router."
    assert transcript.blocks[9].to_json()["text"] == ANSWER
    assert transcript.usage == USAGE
    assert transcript.status == "FINISHED"


def test_tool_calls_group_by_call_id_where_they_started() -> None:
    transcript = build(stored(finished_run_messages()))
    read, test = (block for block in transcript.blocks if isinstance(block, ToolCall))
    # The model's tool_use and the execution's running and completed events: one card.
    assert read.call_id == "call-read"
    assert (read.name, read.status, read.args) == (
        "read_file",
        "completed",
        {"path": "routes/login.py"},
    )
    assert read.result == long_result()
    assert read.seqs == [9, 10, 11]
    assert read.truncated == {"args": False, "result": False}
    assert (test.name, test.status, test.result) == (
        "run_terminal_cmd",
        "error",
        "1 failed: test_redirect_keeps_next",
    )


def test_unknown_types_and_envelopes_are_kept_whole() -> None:
    odd = {
        "seq": 1,
        "offset": "1",
        "runId": "r",
        "eventType": "custom_event",
        "payload": {"anything": [1, 2]},
    }
    future = stored([{"type": "hologram", "frames": 3}])[0] | {"seq": 2, "offset": "2"}
    no_content = stored([{"type": "assistant", "message": None}])[0] | {"seq": 3, "offset": "3"}
    bad_usage = stored([{"type": "usage", "usage": "lots"}])[0] | {"seq": 4, "offset": "4"}
    transcript = build([odd, future, no_content, bad_usage])
    assert all(isinstance(block, Other) for block in transcript.blocks)
    labels = [block.to_json()["label"] for block in transcript.blocks]
    assert labels == ["custom_event", "hologram", "assistant", "usage"]
    assert transcript.blocks[0].to_json()["value"] == {"anything": [1, 2]}
    assert transcript.blocks[1].to_json()["value"]["frames"] == 3


def said(role: str, value: str) -> dict[str, Any]:
    return {"type": role, "message": {"role": role, "content": [{"type": "text", "text": value}]}}


def test_text_of_different_speakers_or_separated_by_other_blocks_is_not_joined() -> None:
    transcript = build(
        stored(
            [
                said("assistant", "one"),
                {"type": "status", "status": "RUNNING"},
                said("assistant", "two"),
                said("user", "three"),
                {"type": "task", "text": "a"},
                {"type": "task", "text": "b"},
            ]
        )
    )
    assert [block.to_json().get("text") for block in transcript.blocks] == [
        "one",
        None,
        "two",
        "three",
        "a",
        "b",
    ]


def test_a_transcript_read_in_pages_has_the_same_text_and_calls() -> None:
    """Page boundaries split blocks but lose nothing: joined, the pages equal the whole."""
    events = stored(finished_run_messages())
    whole = build(events)
    for size in (1, 2, 5):
        texts: dict[str, str] = {}
        calls: dict[str, str] = {}
        for start in range(0, len(events), size):
            for block in build(events[start : start + size]).blocks:
                if isinstance(block, Text):
                    texts[block.kind] = texts.get(block.kind, "") + block.text
                if isinstance(block, ToolCall):
                    calls[block.call_id] = block.status
        for kind in ("user", "assistant", "thinking", "task"):
            assert texts[kind] == "".join(
                block.text
                for block in whole.blocks
                if isinstance(block, Text) and block.kind == kind
            )
        assert calls == {"call-read": "completed", "call-test": "error"}


def test_markdown_keeps_prose_folds_tool_output_and_tables_usage() -> None:
    transcript = build(stored(finished_run_messages()))
    doc = run(LOGIN_AGENT, FINISHED_RUN, 1, "finished", usage=USAGE)
    text = "".join(
        transcript_markdown(
            {"name": "fix login", "cwd": "/src/app"}, doc, transcript.json(), transcript.usage
        )
    )
    assert text.startswith("# fix login: turn 1\n")
    assert f"### User\n\n{PROMPT}\n" in text
    assert "### Thinking (1.5 s)\n\n> Looking at the router first.\n" in text
    # Tool calls fold into <details>; a long result is cut, saying how much was cut.
    assert "<details>\n<summary>Tool call: read_file (completed, 0.0 s)</summary>\n\n" in text
    assert long_result()[:4000] in text
    assert long_result() not in text
    cut = len(long_result()) - 4000
    assert f"*{cut:,} more characters cut ({len(long_result()):,} characters, 400 lines" in text
    assert text.count("<details>") == text.count("</details>") == 2
    assert "*Status FINISHED*" in text
    assert (
        "| Input | Output | Cache read | Cache write | Total |\n"
        "|---:|---:|---:|---:|---:|\n"
        "| 1,200 | 340 | 800 | 16 | 1,556 |"
    ) in text
    # A result holding a fence gets a longer fence, so it cannot end the block early.
    assert fenced("```python\nx\n```") == "````\n```python\nx\n```\n````"
    assert fenced({"a": 1}) == '```json\n{\n  "a": 1\n}\n```'
