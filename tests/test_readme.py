"""The README cannot drift: CLI help blocks, hooks and the quick start are checked."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

from bridge_store import hookspecs

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_help_blocks_are_current() -> None:
    updater = load_script("update_readme_help")
    assert updater.BLOCK.findall(README), "README has no help blocks"
    assert updater.render(README) == README, "run scripts/update_readme_help.py"


def test_every_hook_is_specified_with_a_docstring_and_documented() -> None:
    hooks = [
        name
        for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("bridge_store_")
    ]
    assert hooks
    for name in hooks:
        assert inspect.getdoc(getattr(hookspecs, name)), name
        assert f"`{name}(" in README, f"{name} is not described in the README"


def test_quick_start_is_two_commands_and_uses_the_test_script() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", quick_start, re.S)
    assert [command.strip() for command in commands] == [
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/bridge-store serve",
        "./scripts/test",
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test" in ci
