"""The README and the docs cannot drift: help blocks, hooks, links and commands are checked.

The README is the front door (at most 250 lines); reference material lives in docs/.
Its shell blocks run in tests/test_first_minute.py, literally, on a fresh copy of the
repository, with its inline ``bridge-store bridge`` line; here the rest is checked:
every ``bridge-store`` command it names inline parses and those without a placeholder
run, every relative link of the README and docs/ leads to a file and heading that
exist, the CLI's help in docs/cli.md is current, every hook is documented.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest

from bridge_store.backend import hookspecs
from bridge_store.cli import build_parser, main
from bridge_store.security.auth import Scope, token_digest
from bridge_store.security.tokens_file import load_entries

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
CLI_DOCS = (ROOT / "docs" / "cli.md").read_text()
PLUGINS_DOCS = (ROOT / "docs" / "plugins.md").read_text()
#: STYLE.md: the README is a front door (datasette, uvicorn, pluggy: 90-150 lines).
MAX_README_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shell_blocks(text: str) -> list[str]:
    """The text of every ```sh block, in order."""
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def first_minute_heading() -> str:
    headings: list[str] = re.findall(r"^## (The first minute.*)$", README, re.M)
    (heading,) = headings
    return heading


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES
    assert "](docs/viewer-transcript.png)" in README
    assert "<!-- help:" not in README, "help blocks belong in docs/cli.md"
    # The tested cursor-sdk versions, as tests/support/sdk_versions.py tests them.
    for version in ("0.1.9", "1.0.30", "1.1.0"):
        assert version in README


def test_cli_help_blocks_are_current() -> None:
    updater = load_script("update_cli_docs")
    assert updater.BLOCK.findall(CLI_DOCS), "docs/cli.md has no help blocks"
    assert updater.render(CLI_DOCS) == CLI_DOCS, "run scripts/update_cli_docs.py"


def test_every_command_has_its_help_in_the_cli_docs() -> None:
    documented = set(re.findall(r"<!-- help: ([^>]*?) -->", CLI_DOCS))
    (commands,) = (
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    assert set(commands.choices) <= documented


def test_every_hook_is_specified_with_a_docstring_and_documented() -> None:
    hooks = [
        name
        for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("bridge_store_")
    ]
    assert hooks
    for name in hooks:
        assert inspect.getdoc(getattr(hookspecs, name)), name
        assert f"`{name}(" in PLUGINS_DOCS, f"{name} is not described in docs/plugins.md"


def test_quick_start_is_two_commands_and_uses_the_test_script() -> None:
    commands = shell_blocks(section(README, "Quick start"))
    # One install (with the bridge, for the first minute) and the server on its default.
    install_and_serve = (
        "python3 -m venv .venv && .venv/bin/pip install '.[client]' && .venv/bin/bridge-store serve"
    )
    assert [command.strip() for command in commands] == [install_and_serve, "./scripts/test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci


def inline_commands(text: str) -> list[str]:
    """``bridge-store ...`` command lines quoted inline (`...`), joined across line breaks;
    ``.venv/bin/bridge-store ...`` (as the README's install leaves it) counts too."""
    quoted = re.findall(r"`((?:\.venv/bin/)?bridge-store [^`]+)`", text)
    return [" ".join(command.removeprefix(".venv/bin/").split()) for command in quoted]


def test_every_command_the_readme_names_inline_parses() -> None:
    commands = inline_commands(README)
    assert len(commands) >= 3
    for command in commands:
        argv = shlex.split(command)[1:]
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit_:  # argparse's way of refusing
            pytest.fail(f"{command!r} does not parse (exit {exit_.code})")


#: An inline command with one of these is a pattern for the reader to fill in, not a
#: line to paste: it is parsed above, not run.
PLACEHOLDERS = ("...", " URL", " NAME")


def test_every_inline_command_without_a_placeholder_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's pasteable inline commands run as written (the first minute's run in
    tests/test_first_minute.py, on the demo's server and with the real bridge); the
    token they make works."""
    first_minute = inline_commands(section(README, first_minute_heading()))
    assert "bridge-store demo" in first_minute
    runnable = [
        command
        for command in inline_commands(README)
        if not any(mark in command for mark in PLACEHOLDERS) and command not in first_minute
    ]
    assert runnable == [
        "bridge-store token add alice --tenant app-team --scope write --tokens-file tokens.toml"
    ]
    monkeypatch.chdir(tmp_path)
    for command in runnable:
        assert main(shlex.split(command)[1:]) == 0
    printed = capsys.readouterr().out
    (entry,) = load_entries(tmp_path / "tokens.toml")
    assert (entry.name, entry.tenant, entry.scope) == ("alice", "app-team", Scope.WRITE)
    (token,) = (word for word in printed.split() if token_digest(word) == entry.sha256)
    assert token not in (tmp_path / "tokens.toml").read_text()


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lowercased, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings
    }


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in anchors(linked)
        ):
            broken.append(target)
    assert broken == []
