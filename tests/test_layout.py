"""The tree keeps the shape the README and docs describe: small modules, named homes.

Statements about the code in prose rot; these tests keep the ones that can be checked
true: the size bound of modules, the modules the README's layout names, and the
``python -m bench`` commands the README and docs tell people to run.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from bench.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
#: The project's bound (STYLE.md: small, explicit modules); docs/connect.md cites it.
MAX_MODULE_LINES = 400


def test_no_module_of_the_product_or_the_bench_is_over_the_size_bound() -> None:
    modules = [
        path
        for folder in ("bridge_store", "backends", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if "_generated" not in path.parts
    ]
    assert modules
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in modules
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"split these modules (over {MAX_MODULE_LINES} lines): {too_long}"


def test_the_wheel_lists_every_package_of_the_tree() -> None:
    # setuptools ships only the packages pyproject names: a new package left out of
    # the list works from the source tree and is missing from the installed wheel.
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {Path(folder): name for name, folder in options["package-dir"].items()}
    in_tree = {
        ".".join((folders[top], *init.parent.relative_to(ROOT / top).parts))
        for top in folders
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert in_tree - set(options["packages"]) == set()


def test_the_readme_layout_names_modules_that_exist() -> None:
    layout = README.split("\nLayout: ", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`([\w/]+(?:\.py|/))`", layout)
    assert "connect.py" in named
    homes = [ROOT, ROOT / "bridge_store", ROOT / "bench", *sorted((ROOT / "backends").iterdir())]
    homes += [ROOT / "bridge_store" / layer for layer in ("wire", "security", "ops")]
    for name in named:
        assert any((home / name).exists() for home in homes), f"{name} is not in the tree"


def test_every_bench_command_the_docs_name_exists() -> None:
    texts = [README, *(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))]
    named = {name for text in texts for name in re.findall(r"python -m bench ([a-z][\w-]*)", text)}
    assert "load" in named
    assert named <= set(COMMANDS), f"not bench commands: {sorted(named - set(COMMANDS))}"


def imports_of(path: Path) -> set[str]:
    """The modules ``path`` imports (absolute names), at its top or inside functions."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            # ``from . import serve`` imports the module ``serve``.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_command_imports_another() -> None:
    # What commands share lives in cli/shared/; a command importing another drags its
    # parser and its run in, and hides what they share.
    cli = ROOT / "bridge_store" / "cli"
    commands = {f"bridge_store.cli.{path.stem}": path for path in cli.glob("*.py")}
    commands = {name: path for name, path in commands.items() if not name.endswith("__")}
    assert "bridge_store.cli.serve" in commands
    crossing = {
        name: sorted(imports_of(path) & (set(commands) - {name})) for name, path in commands.items()
    }
    assert {name: found for name, found in crossing.items() if found} == {}
