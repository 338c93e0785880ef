"""History printed by the CLI carries no control character to a terminal.

A writer of the tenant can store ESC sequences (clear the screen, set the window's
title, recolour), carriage returns and newlines in any text: an agent's name, its
workspace, a model id, a prompt, a tool's name and result, an error. ``agents``,
``runs``, ``overview`` and ``transcript`` (plain, on a terminal and as Markdown) show
each as a visible stand-in, keep the text readable, and keep one row per item.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from bridge_store.cli import main
from bridge_store.viewer.markdown import transcript_markdown
from bridge_store.viewer.printable import printable_cell, printable_lines
from bridge_store.viewer.terminal import Output, TranscriptPrinter
from bridge_store.viewer.transcript import TranscriptBuilder

from .support.history import T0, agent, message, run, text
from .support.server import serve

#: Clear the screen, recolour, retitle the window (OSC ... BEL), overwrite the line,
#: forge a second row, and C1's one-byte CSI.
HOSTILE = "evil\x1b[2J\x1b[31mRED\x1b]0;owned\x07\rOVER\nagent-forged\tfake\x9b6n\x7f"
#: Every character a terminal acts on, but the newline and tab text keeps.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_control_characters_are_shown_not_sent() -> None:
    shown = printable_lines(HOSTILE)
    assert CONTROL.search(shown) is None
    assert shown.count("\n") == 1
    assert "\u241b[2J" in shown  # ESC's picture, then the rest of the sequence as text
    assert "\u240d" in shown  # CR
    assert "\ufffd6n" in shown  # C1 CSI
    cell = printable_cell(HOSTILE)
    assert CONTROL.search(cell) is None
    assert "\n" not in cell
    assert "\t" not in cell
    assert "agent-forged fake" in cell
    assert printable_lines("plain text\n\tindented") == "plain text\n\tindented"


def events() -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = [
        {"type": "user", "message": {"content": [text(f"hi {HOSTILE}")]}},
        {"type": "assistant", "message": {"content": [text(HOSTILE)]}},
        {"type": "tool_call", "call_id": "c1", "name": f"t{HOSTILE}", "status": "running"},
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": f"t{HOSTILE}",
            "status": "error",
            "args": {"k": HOSTILE},
            "result": HOSTILE,
        },
        {"type": "status", "status": "ERROR", "message": HOSTILE},
    ]
    return [
        {**message("agent-e", "run-e", body), "seq": n, "offset": str(n), "createdAt": T0 + n}
        for n, body in enumerate(bodies, start=1)
    ]


@pytest.mark.parametrize("terminal", [False, True])
def test_a_transcript_printed_plain_or_rendered_sends_no_control_character(
    terminal: bool,
) -> None:
    stream = io.StringIO()
    output = Output(stream, terminal=terminal)
    printer = TranscriptPrinter(output)
    printer.add(events()[:3])  # the tool call shown running, then updated
    printer.add(events()[3:])
    printer.finish()
    printed = stream.getvalue()
    if terminal:  # Rich's own styling is the only ESC left
        printed = re.sub(r"\x1b\[[0-9;]*m", "", printed)
    assert CONTROL.search(printed) is None, repr(printed)
    assert "RED" in printed
    assert "agent-forged" in printed


def test_the_markdown_export_holds_no_control_character() -> None:
    builder = TranscriptBuilder().extend(events())
    doc = run("agent-e", "run-e", 1, "error", error={"message": HOSTILE}, model={"id": HOSTILE})
    exported = "".join(
        transcript_markdown({"name": HOSTILE, "cwd": HOSTILE}, doc, builder.json(), builder.usage)
    )
    assert CONTROL.search(exported) is None
    assert "OVER" in exported


@pytest.mark.parametrize("terminal", [False, True])
def test_table_rows_stay_one_per_item(terminal: bool) -> None:
    stream = io.StringIO()
    Output(stream, terminal=terminal).table(["name", "id"], [(HOSTILE, "agent-e")], "Agents")
    printed = stream.getvalue()
    if terminal:
        printed = re.sub(r"\x1b\[[0-9;]*m", "", printed)
    assert CONTROL.search(printed) is None
    if not terminal:
        assert printed.splitlines()[1:] == [f"{printable_cell(HOSTILE)}\tagent-e"]


def test_the_read_commands_print_a_hostile_history_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'store.db'}"]
    calls = [
        ("agents", "create", {"agent": agent("agent-e", HOSTILE, f"/w{HOSTILE}", "idle", T0)}),
        (
            "runs",
            "create",
            {
                "run": run(
                    "agent-e",
                    "run-e",
                    1,
                    "error",
                    model={"id": f"m{HOSTILE}"},
                    error={"message": HOSTILE},
                    endedAt=T0 + 120_000,
                )
            },
        ),
        *(
            (
                "runEvents",
                "append",
                {k: v for k, v in e.items() if k not in ("seq", "offset", "createdAt")},
            )
            for e in events()
        ),
    ]
    with serve(*store) as server:
        for substore, method, data in calls:
            server.call(substore, method, data)
    capsys.readouterr()
    for argv in (
        ["agents"],
        ["runs"],
        ["runs", "agent-e"],
        ["overview", "--to", "2026-05-28", "--days", "30"],
        ["transcript", "run-e"],
        ["transcript", "run-e", "--markdown"],
    ):
        assert main([*argv, *store]) == 0, argv
        out, err = capsys.readouterr()
        assert CONTROL.search(out + err) is None, (argv, out)
        assert "RED" in out, argv
    # One row per agent and per run: the name's newline forged none.
    assert main(["agents", *store]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["runs", *store]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
