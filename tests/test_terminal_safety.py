"""Every command that prints document text sends a terminal text, never commands.

A tenant's writer controls every name, id, workspace, status, prompt and result: ESC
sequences (retitle the window, clear the screen, write the clipboard with OSC 52), C1
controls (U+009B is a one-character CSI), DEL, bidi overrides that reorder what a
line seems to say, lone surrogates (which no UTF-8 terminal can be sent), and Rich
markup (``[link=...]``, a stray ``[/bold]``). Each command, in each output mode,
shows them as text: tables and transcripts through the printable stand-ins, escaped
for Rich; ``--json`` as valid JSON with those characters as ``\\u`` escapes.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.terminal import Output, json_line
from testkit.inprocess import running

from .support.history import T0, agent, message, run, text

TOKEN = "terminal-safety-token-01"
#: Retitle the window, clear the screen, write the clipboard (OSC 52), C1's CSI, a
#: right-to-left override, Rich markup that links and that closes what is not open,
#: DEL and a lone surrogate.
HOSTILE = (
    "evil\x1b]0;owned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x9b31m\u202eRTL\u2066"
    "[link=https://attacker.example]click[/link] [/bold] x\x7f\ud800!"
)
#: An id may hold all of it but NUL and the lone surrogate.
HOSTILE_ID = "agent\x1b[2J\x9b\u202e\x7f[/bold]"
RUN_ID = "run\x1b]0;t\x07"
#: What must not reach a terminal: C0 but newline and tab, DEL, C1, the bidi
#: embeddings, overrides and isolates, and surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: Rich's own colours and styles, the only escape sequences a table may hold.
RICH_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def calls() -> list[tuple[str, str, dict[str, object]]]:
    bodies: list[dict[str, object]] = [
        {"type": "user", "message": {"content": [text(HOSTILE)]}},
        {"type": "thinking", "text": HOSTILE, "thinking_duration_ms": 1200},
        {"type": "assistant", "message": {"content": [text(HOSTILE)]}},
        {"type": "tool_call", "call_id": HOSTILE, "name": HOSTILE, "status": HOSTILE},
        {
            "type": "tool_call",
            "call_id": HOSTILE,
            "status": "error",
            "args": {HOSTILE: HOSTILE},
            "result": HOSTILE,
        },
        {"type": "status", "status": HOSTILE, "message": HOSTILE},
        {"type": HOSTILE, "value": HOSTILE},
    ]
    doc = run(
        HOSTILE_ID,
        RUN_ID,
        1,
        HOSTILE,
        model={"id": HOSTILE},
        error={"code": HOSTILE, "message": HOSTILE},
        usage={"inputTokens": 5, "totalTokens": 5},
        endedAt=T0 + 120_000,
    )
    return [
        ("agents", "create", {"agent": agent(HOSTILE_ID, HOSTILE, f"/w{HOSTILE_ID}", HOSTILE, T0)}),
        ("runs", "create", {"run": doc}),
        *(("runEvents", "append", message(HOSTILE_ID, RUN_ID, body)) for body in bodies),
        # A second agent with a run of the same id: `transcript RUN_ID` names both.
        ("agents", "create", {"agent": agent(f"{HOSTILE_ID}2", "", "/w", "idle", T0)}),
        ("runs", "create", {"run": run(f"{HOSTILE_ID}2", RUN_ID, 1, "finished")}),
    ]


@dataclass(frozen=True)
class Hostile:
    store: list[str]
    remote: list[str]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    folder = tmp_path_factory.mktemp("hostile")
    url = f"sqlite:///{folder / 'store.db'}"
    token_file = folder / "token"
    token_file.write_text(TOKEN)
    app = create_app(ServerConfig(routes=Routes.single(url), auth_token=TOKEN))
    with running(app, access_log=False) as server:
        for substore, method, data in calls():
            store_call(server, substore, method, data)
        remote = ["--store-callback-url", server, "--store-auth-token-file", str(token_file)]
        yield Hostile(["--store", url], remote)


@pytest.fixture(params=["direct", "remote"])
def source(request: pytest.FixtureRequest, hostile: Hostile) -> list[str]:
    return hostile.store if request.param == "direct" else hostile.remote


def command_id(argv: list[str]) -> str:
    return "-".join(arg for arg in argv if arg.isascii() and arg.isprintable())


READS = [
    ["agents"],
    ["runs"],
    ["runs", HOSTILE_ID],
    ["overview", "--to", "2026-05-28"],
    ["transcript", RUN_ID, "--agent", HOSTILE_ID],
    ["transcript", RUN_ID, "--agent", HOSTILE_ID, "--markdown"],
]


@pytest.mark.parametrize("argv", READS, ids=command_id)
def test_a_terminal_gets_text_not_commands_or_markup(
    argv: list[str],
    source: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # Rich renders as for a terminal
    monkeypatch.setenv("COLUMNS", "4000")  # that holds a whole row on a line
    capsys.readouterr()
    assert main([*argv, *source]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    shown = RICH_STYLE.sub("", out + err)
    assert RAW.search(shown) is None, repr(shown[:2000])
    assert "\x1b]8;" not in out  # no hyperlink: the markup is text
    if argv[0] != "overview":
        assert "[link=https://attacker.example]click[/link]" in shown


@pytest.mark.parametrize("argv", READS[:-1], ids=command_id)
def test_piped_output_holds_no_control_character(
    argv: list[str], source: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*argv, *source]) == 0
    out, err = capsys.readouterr()
    assert RAW.search(out + err) is None, repr((out + err)[:2000])


@pytest.mark.parametrize(
    "argv",
    [
        ["agents", "--json"],
        ["runs", "--json"],
        ["runs", HOSTILE_ID, "--json"],
        ["transcript", RUN_ID, "--agent", HOSTILE_ID, "--json"],
        ["overview", "--to", "2026-05-28", "--json"],
    ],
    ids=command_id,
)
def test_json_is_valid_json_that_escapes_what_a_terminal_acts_on(
    argv: list[str], source: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main([*argv, *source]) == 0
    out = capsys.readouterr().out
    assert RAW.search(out) is None, repr(out[:2000])
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines
    if argv[0] in ("agents", "runs") and len(argv) == 2:
        names = {each.get("name") or each.get("agentName") for each in lines}
        assert HOSTILE in names  # the same text, lone surrogate and all, once parsed


def test_json_lines_escape_only_what_they_must() -> None:
    line = json_line({"name": f"café {HOSTILE}\u2028\u2029", "n": 1})
    assert json.loads(line) == {"name": f"café {HOSTILE}\u2028\u2029", "n": 1}
    assert line.splitlines() == [line]  # one line, to any reader
    assert "\\u2028\\u2029" in line
    assert "café" in line  # other text stays readable
    assert "\\u001b]0;owned\\u0007" in line
    assert "\\u009b31m\\u202eRTL\\u2066" in line
    assert "\\u007f\\ud800!" in line
    assert RAW.search(line) is None


def test_a_refusal_naming_stored_ids_is_one_line_of_text(
    hostile: Hostile, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run id names two agents: the error lists their ids.
    capsys.readouterr()
    assert main(["transcript", RUN_ID, *hostile.store]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bridge-store: invalid_argument: run ")
    assert len(err.splitlines()) == 1
    assert RAW.search(err) is None, repr(err)


def store_call(url: str, substore: str, method: str, data: object) -> None:
    # As JSON text of our own: a lone surrogate travels as its \\u escape.
    body = json.dumps({"substore": substore, "method": method, "input": data})
    answer = httpx.post(
        url + CALL_STORE_PATH,
        content=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 200, answer.text


def test_prune_gc_and_copy_print_stored_ids_as_text(
    hostile: Hostile, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The copy's target already holds the agent, differently: copy and its --verify
    # name it.
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    app = create_app(ServerConfig(routes=Routes.single(target), auth_token=TOKEN))
    with running(app, access_log=False) as url:
        store_call(url, "agents", "create", {"agent": agent(HOSTILE_ID, "other", "/", "idle", 1)})
    capsys.readouterr()
    store = hostile.store
    assert main(["prune", *store, "--older-than", "1s", "--dry-run"]) == 0
    assert main(["gc", *store, "--dry-run"]) == 0
    assert main(["copy", "--from", store[1], "--to", target, "--verify"]) == 1
    out, err = capsys.readouterr()
    assert "would prune agent agent" in out
    assert "agents: agent agent" in out
    assert RAW.search(out + err) is None, repr(out + err)


def test_a_terminal_table_cuts_long_cells_and_a_pipe_keeps_them() -> None:
    # Found by tests/test_readers_fuzz.py: a 1 MiB name was a screenful per row, and
    # Rich took over a second to lay each table out.
    name = "w" * (1 << 20)
    terminal, pipe = io.StringIO(), io.StringIO()
    Output(terminal, terminal=True).table(["name"], [(name,)], f"Runs of {name}")
    Output(pipe, terminal=False).table(["name"], [(name,)], f"Runs of {name}")
    assert len(terminal.getvalue()) < 4000
    assert "(1,048,576 characters)" in terminal.getvalue()
    assert pipe.getvalue() == f"name\n{name}\n"
