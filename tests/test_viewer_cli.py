"""``bridge-store agents``, ``runs`` and ``transcript``: against a store URL directly and
through a running server, as tables and text, JSON lines and Markdown, and following
a live run to its end."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.security.auth import SHORTHAND_TOKEN_NAME
from bridge_store.viewer.terminal import AGENT_COLUMNS, RUNS_COLUMNS, Output, TranscriptPrinter

from .support.history import (
    ANSWER,
    DOCS_AGENT,
    FAILED_RUN,
    FINISHED_RUN,
    LIVE_RUN,
    LOGIN_AGENT,
    PROMPT,
    finished_run_messages,
    history_calls,
    live_run_ending,
    long_result,
)
from .support.sample import write_sample
from .support.server import ServerProcess, serve
from .test_viewer_transcript import stored

#: Bounds how long a broken follower takes to fail; a working one ends at once.
FOLLOW_TIMEOUT_SECONDS = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    store = tmp_path_factory.mktemp("cli") / "store.db"
    with serve("--store", f"sqlite:///{store}") as running:
        for substore, method, data in history_calls():
            running.call(substore, method, data)
        yield running


@pytest.fixture(scope="module")
def store_args(server: ServerProcess) -> list[str]:
    """Reading the same SQLite file directly, beside the server (WAL lets both in)."""
    store = next(arg for arg in server.process.args if str(arg).startswith("sqlite:"))  # type: ignore[union-attr]
    return ["--store", str(store)]


@pytest.fixture(scope="module")
def remote_args(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(server.token + "\n")
    return ["--store-callback-url", server.url, "--store-auth-token-file", str(token_file)]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=["direct", "remote"])
def source(request: pytest.FixtureRequest) -> list[str]:
    return list(
        request.getfixturevalue(f"{'store' if request.param == 'direct' else 'remote'}_args")
    )


def test_agents_as_plain_rows_when_piped(
    capsys: pytest.CaptureFixture[str], source: list[str]
) -> None:
    code, out, _ = run_cli(capsys, "agents", *source)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t") == list(AGENT_COLUMNS)
    assert [line.split("\t")[-1] for line in lines[1:]] == [LOGIN_AGENT, DOCS_AGENT]
    # The last run's status, every run's tokens, who created the agent.
    assert lines[1].split("\t")[3:6] == ["error", "1,556", SHORTHAND_TOKEN_NAME]
    assert lines[2].split("\t")[3:6] == ["running", "-", SHORTHAND_TOKEN_NAME]
    code, out, _ = run_cli(capsys, "agents", "--archived", "--cwd", "/src/app", *source)
    assert [line.split("\t")[2] for line in out.splitlines()[1:]] == ["fix login", "old spike"]


def test_agents_page_by_cursor_and_print_json_lines(
    capsys: pytest.CaptureFixture[str], source: list[str]
) -> None:
    code, out, err = run_cli(capsys, "agents", "--limit", "1", "--json", *source)
    assert code == 0
    assert [json.loads(line)["agentId"] for line in out.splitlines()] == [LOGIN_AGENT]
    assert err.startswith("more: --cursor ")
    cursor = err.split()[-1]
    code, out, err = run_cli(capsys, "agents", "--json", "--cursor", cursor, *source)
    assert [json.loads(line)["agentId"] for line in out.splitlines()] == [DOCS_AGENT]
    assert err == ""
    assert all("sdkMetadata" not in json.loads(line) for line in out.splitlines())


def test_runs_newest_first(capsys: pytest.CaptureFixture[str], source: list[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", LOGIN_AGENT, *source)
    assert code == 0
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    assert [(row[0], row[1], row[-1]) for row in rows] == [
        ("2", "error", FAILED_RUN),
        ("1", "finished", FINISHED_RUN),
    ]
    assert rows[1][4:7] == ["1 min 23 s", "1,556", SHORTHAND_TOKEN_NAME]
    assert rows[0][7] == "[permission_denied] HTTP 403"
    code, out, _ = run_cli(capsys, "runs", LOGIN_AGENT, "--json", *source)
    assert code == 0
    assert [json.loads(line)["runId"] for line in out.splitlines()] == [FAILED_RUN, FINISHED_RUN]


def test_runs_of_every_agent_filtered_ordered_and_paged(
    capsys: pytest.CaptureFixture[str], source: list[str]
) -> None:
    code, out, _ = run_cli(capsys, "runs", *source)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t") == list(RUNS_COLUMNS)
    # The failed run started last, the live run of the other agent before it.
    assert [line.split("\t")[-1] for line in lines[1:]] == [FAILED_RUN, FINISHED_RUN, LIVE_RUN]
    code, out, _ = run_cli(capsys, "runs", "--sort", "duration", "--json", *source)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["runId"] for row in rows] == [FINISHED_RUN, FAILED_RUN, LIVE_RUN]
    assert rows[0]["createdBy"] == SHORTHAND_TOKEN_NAME
    assert rows[0]["agentName"] == "fix login"
    code, out, err = run_cli(
        capsys, "runs", "--status", "finished", "--cwd", "/src/app", "--limit", "1", *source
    )
    assert [line.split("\t")[-1] for line in out.splitlines()[1:]] == [FINISHED_RUN]
    assert err == ""
    code, out, err = run_cli(capsys, "runs", "--limit", "1", "--json", *source)
    assert err.startswith("more: --cursor ")
    cursor = err.split()[-1]
    code, out, err = run_cli(capsys, "runs", "--limit", "1", "--json", "--cursor", cursor, *source)
    assert [json.loads(line)["runId"] for line in out.splitlines()] == [FINISHED_RUN]
    code, out, err = run_cli(capsys, "runs", "--by", "nobody", *source)
    assert out.splitlines()[1:] == []
    code, _, err = run_cli(capsys, "runs", "--since", "May 1", *source)
    assert code == 1
    assert err == "bridge-store: invalid_argument: since must be a date, YYYY-MM-DD, not 'May 1'\n"
    code, _, err = run_cli(capsys, "runs", LOGIN_AGENT, "--status", "error", *source)
    assert code == 2
    assert "leave out AGENT_ID" in err


def test_overview_of_the_last_days_with_and_without_prices(
    capsys: pytest.CaptureFixture[str], source: list[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "overview", "--to", "2026-05-28", *source)
    assert code == 0
    assert "2026-05-22 to 2026-05-28\t3\t1\t1,200\t340\t800\t16\t0.9 s\t1 min 23 s" in out
    assert "composer-2\t3\t1\t" in out
    assert "run_terminal_cmd\t1\t1" in out
    code, out, _ = run_cli(
        capsys, "overview", "--to", "2026-05-28", "--days", "30", "--json", *source
    )
    data = json.loads(out)
    assert data["days"] == 30
    assert data["windows"]["30"]["from"] == "2026-04-29"
    assert data["windows"]["7"]["total"]["tools"]["byFailures"] == [
        {"tool": "run_terminal_cmd", "calls": 1, "failures": 1}
    ]
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."composer-2"]\ninput = 1000\noutput = 1000\n')
    code, out, err = run_cli(
        capsys, "overview", "--to", "2026-05-28", "--prices", str(prices), "--json", *source
    )
    if source[0] == "--store-callback-url":
        # Through a server, the server's own table prices the pages.
        assert code == 2
        assert err.count("\n") == 1
        assert "through a server the pages are priced with the server's own table" in err
        return
    data = json.loads(out)
    week = data["windows"]["7"]
    # (1,200 input + 340 output) tokens at 1,000 a million, exactly, as decimal text.
    assert week["total"]["cost"] == "1.540000"
    assert data["byCreator"]["rows"][0]["creator"] == SHORTHAND_TOKEN_NAME
    assert data["byCreator"]["rows"][0]["cost"] == "1.540000"
    # Costliest first; the other agent's run reported no usage: it cost nothing.
    agents = data["byAgent"]["rows"]
    assert [row["name"] for row in agents] == ["fix login", "write docs"]
    assert (agents[1]["cost"], agents[1]["unpriced"]) == ("0.000000", None)
    code, out, _ = run_cli(
        capsys,
        "overview",
        "--to",
        "2026-05-28",
        "--prices",
        str(prices),
        "--by",
        "agent",
        *source,
    )
    assert code == 0
    assert "fix login\t2\t1\t2,356\t0\t1.54 USD\t0.00 USD" in out
    assert "By day" not in out
    prices.write_text("[models.x]\ninput = -1\noutput = 1\n")
    code, _, err = run_cli(capsys, "overview", "--prices", str(prices), *source)
    assert code == 2
    assert err.count("\n") == 1
    assert "models.x.input must be a number from 0 to 1,000,000,000" in err


def test_transcript_as_text_json_lines_and_markdown(
    capsys: pytest.CaptureFixture[str], source: list[str], server: ServerProcess
) -> None:
    code, out, _ = run_cli(capsys, "transcript", FINISHED_RUN, *source)
    assert code == 0
    assert f"user: {PROMPT}\n" in out
    assert "thinking (1.5 s): Looking at the router first.\n" in out
    assert 'tool read_file [completed]\n  args: {"path":"routes/login.py"}' in out
    assert f"assistant: {ANSWER}\n" in out
    assert out.rstrip().endswith("status FINISHED")
    code, out, _ = run_cli(capsys, "transcript", FINISHED_RUN, "--json", *source)
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(finished_run_messages()) + 1))
    code, out, _ = run_cli(
        capsys, "transcript", FINISHED_RUN, "--agent", LOGIN_AGENT, "--markdown", *source
    )
    assert out.startswith("# fix login: turn 1\n")
    assert long_result()[:4000] in out
    assert long_result() not in out  # cut, with a count of what was cut
    # The command prints exactly what the viewer exports.
    export = httpx.get(
        f"{server.url}ui/export/transcript.md?agent={LOGIN_AGENT}&run={FINISHED_RUN}",
        headers={"Authorization": f"Bearer {server.token}"},
    )
    assert out == export.text


def test_mistakes_are_one_line_errors(
    capsys: pytest.CaptureFixture[str],
    server: ServerProcess,
    store_args: list[str],
    remote_args: list[str],
    tmp_path: Path,
) -> None:
    code, _, err = run_cli(capsys, "transcript", "run-nothing", *store_args)
    assert (code, err) == (1, "bridge-store: not_found: no run 'run-nothing'\n")
    code, _, err = run_cli(capsys, "runs", "agent-nobody", *remote_args)
    assert (code, err) == (1, "bridge-store: not_found: no agent 'agent-nobody'\n")
    code, _, err = run_cli(capsys, "agents", *store_args, *remote_args)
    assert code == 2
    assert "--store-callback-url reads through a running server" in err
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    code, _, err = run_cli(
        capsys,
        "agents",
        "--store-callback-url",
        remote_args[1],
        "--store-auth-token-file",
        str(wrong),
    )
    assert code == 1
    # It said "sign in first", the viewer's words: a command has no sign-in.
    assert err == (
        f"bridge-store: unauthenticated: the store at {server.url} rejected the token in "
        f"{wrong} (401 unauthenticated); give the token the server was started with "
        "(serve's --auth-token-file, ./bridge-store.token by default), or one of its "
        "--tokens-file\n"
    )
    code, _, err = run_cli(
        capsys,
        "overview",
        "--store-callback-url",
        server.url,
        "--store-auth-token-file",
        f"{wrong}",
    )
    assert (code, err.count("\n")) == (1, 1)
    assert f"rejected the token in {wrong}" in err
    # https:// to a server that speaks plain HTTP: said so, not OpenSSL's words.
    secure = server.url.replace("http://", "https://", 1)
    code, _, err = run_cli(capsys, "agents", "--store-callback-url", secure, *remote_args[2:])
    assert (code, err) == (
        1,
        f"bridge-store: unavailable: the server at {secure} speaks plain HTTP, not HTTPS: "
        f"give {server.url}\n",
    )
    code, _, err = run_cli(
        capsys,
        "agents",
        "--store-callback-url",
        "http://127.0.0.1:9/",
        "--store-auth-token-file",
        str(wrong),
    )
    assert code == 1
    assert err.startswith("bridge-store: unavailable: cannot reach the store")


def test_the_viewer_s_address_is_taken_for_the_server_s(
    capsys: pytest.CaptureFixture[str], server: ServerProcess, remote_args: list[str]
) -> None:
    # The ready line's viewerUrl, or the browser's address bar: it said "serves no
    # viewer (/ui/): start it without --no-ui".
    viewer = server.url + "ui/"
    for command in (["agents"], ["runs"], ["runs", LOGIN_AGENT], ["overview"]):
        by_server = run_cli(capsys, *command, *remote_args)
        by_viewer = run_cli(capsys, *command, "--store-callback-url", viewer, *remote_args[2:])
        assert by_viewer == by_server, command
        assert by_viewer[0] == 0


def test_follow_prints_a_live_run_until_it_ends(
    server: ServerProcess, remote_args: list[str]
) -> None:
    follower = subprocess.Popen(
        [sys.executable, "-m", "bridge_store", "transcript", LIVE_RUN, "--follow", *remote_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        seen = [follower.stdout.readline() for _ in range(2)]
        assert seen == ["request req-docs-1\n", "status RUNNING\n"]
        time.sleep(0.5)  # the follower is polling now; what follows arrives live
        assert follower.poll() is None
        for substore, method, data in live_run_ending():
            server.call(substore, method, data)
        out, err = follower.communicate(timeout=FOLLOW_TIMEOUT_SECONDS)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, err
    assert out == (
        "user: Document the CLI\nassistant: The CLI has five commands.\nstatus FINISHED\n"
    )


def test_a_terminal_gets_rich_tables_and_styled_transcripts() -> None:
    stream = io.StringIO()
    output = Output(stream, terminal=True)
    row = ("2026-05-28", "idle", "[fix]", "error", "1,556", "ci", "/src", "a1")
    output.table(AGENT_COLUMNS, [row], "Agents")
    printer = TranscriptPrinter(output)
    printer.add(stored(finished_run_messages()))
    printer.finish()
    text = stream.getvalue()
    assert "┏" in text
    assert "[fix]" in text
    assert "\x1b[" in text
    assert "⚙ read_file" in text
    assert "… (13,889 characters)" in text


def test_ids_stay_on_one_line_on_a_140_column_terminal(tmp_path: Path) -> None:
    # They were cut over two lines: names and paths wrap now, ids and times never.
    url = f"sqlite:///{tmp_path / 'sample.db'}"
    sample = write_sample(url)
    shown = [
        agent.agent_id
        for agent in sample.agents
        if agent.tenant == "app-team" and not agent.story.archived
    ]
    terminal = {**os.environ, "COLUMNS": "140", "TTY_COMPATIBLE": "1"}
    listed = subprocess.run(
        [sys.executable, "-m", "bridge_store", "agents", "--store", url, "--tenant", "app-team"],
        env=terminal,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in listed.splitlines()]
    assert "┏" in listed
    assert max(len(line) for line in lines) <= 140
    for agent_id in shown:
        assert [line for line in lines if agent_id in line], agent_id
    # Too narrow to keep them whole and leave the rest readable: everything folds.
    narrow = subprocess.run(
        [sys.executable, "-m", "bridge_store", "agents", "--store", url, "--tenant", "app-team"],
        env={**terminal, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert not [agent_id for agent_id in shown if agent_id in narrow]


def test_following_prints_tool_updates_and_holds_growing_text() -> None:
    stream = io.StringIO()
    printer = TranscriptPrinter(Output(stream, terminal=False))
    events = stored(finished_run_messages())
    printer.add(events[:8])  # up to the first assistant delta of two
    assert "I'll read" not in stream.getvalue()
    printer.add(events[8:10])  # the second delta, the tool's request and start
    assert "assistant: I'll read the router.\ntool read_file [running]" in stream.getvalue()
    printer.add(events[10:])
    printer.finish()
    assert "tool read_file -> completed:" in stream.getvalue()


def test_no_tenant_hint_where_the_tenant_holds_history_or_nobody_does(
    capsys: pytest.CaptureFixture[str], store_args: list[str]
) -> None:
    code, out, err = run_cli(capsys, "agents", *store_args, "--json")
    assert (code, err) == (0, "")
    assert LOGIN_AGENT in out
    # An empty store has no other tenant to point at.
    assert run_cli(capsys, "agents", "--store", "memory://", "--json") == (0, "", "")


def test_runs_and_overview_of_an_empty_tenant_name_the_tenants_holding_history(
    capsys: pytest.CaptureFixture[str], store_args: list[str]
) -> None:
    choose = "this store holds history in tenant default: choose one with --tenant default"
    code, out, err = run_cli(capsys, "runs", *store_args, "--tenant", "team-z", "--json")
    assert (code, out) == (0, "")
    assert err.startswith("bridge-store: no runs: tenant team-z holds none of it; ")
    assert choose in err
    code, out, err = run_cli(capsys, "overview", *store_args, "--tenant", "team-z", "--json")
    assert code == 0
    assert json.loads(out)["windows"]["30"]["total"]["runs"] == 0
    assert err.startswith("bridge-store: no runs in these days: tenant team-z holds none of it;")
    assert choose in err
    # The tenant holding the history is told nothing more.
    assert run_cli(capsys, "runs", *store_args, "--json")[2] == ""
    assert run_cli(capsys, "overview", *store_args, "--json", "--to", "2026-05-28")[2] == ""
