"""The tree keeps the shape the README and docs describe: small modules, named homes.

Statements about the code in prose rot; these tests keep the ones that can be checked
true: the size bound of modules, the modules the README's layout names, which
top-level package may import which, and the ``python -m bench`` commands the README
and docs tell people to run.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Top-level packages that are not the product: the tests, the benchmarks (with their
#: own tests, bench/tests) and the test infrastructure both share (testkit). They run
#: from the source tree and are left out of the wheel; every other package is shipped.
DEVELOPMENT_PACKAGES = ("tests", "bench", "testkit")
README = (ROOT / "README.md").read_text()
#: The project's bound (STYLE.md: small, explicit modules); docs/connect.md cites it.
MAX_MODULE_LINES = 400


def test_no_module_of_the_product_or_the_bench_is_over_the_size_bound() -> None:
    modules = [
        path
        for folder in ("bridge_store", "backends", "bench", "testkit")
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
    # A top-level package is either shipped (in package-dir) or a development package:
    # a new one in neither would be missing from the wheel without anyone noticing.
    top_level = {init.parent.relative_to(ROOT) for init in ROOT.glob("*/__init__.py")}
    top_level |= {init.parent.relative_to(ROOT) for init in ROOT.glob("backends/*/__init__.py")}
    development = {Path(name) for name in DEVELOPMENT_PACKAGES}
    assert top_level - development == set(folders)
    assert not development & set(folders)


def test_the_readme_layout_names_modules_that_exist() -> None:
    layout = README.split("\nLayout: ", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`([\w/]+(?:\.py|/))`", layout)
    assert "connect.py" in named
    homes = [ROOT, ROOT / "bridge_store", ROOT / "bench", ROOT / "testkit"]
    homes += sorted((ROOT / "backends").iterdir())
    homes += [ROOT / "bridge_store" / layer for layer in ("wire", "security", "ops")]
    for name in named:
        assert any((home / name).exists() for home in homes), f"{name} is not in the tree"


def test_every_bench_command_the_docs_name_exists() -> None:
    texts = [README, *(path.read_text() for path in sorted((ROOT / "docs").glob("*.md")))]
    named = {name for text in texts for name in re.findall(r"python -m bench ([a-z][\w-]*)", text)}
    assert "load" in named
    # Asked of ``python -m bench --help``, since tests import nothing from the bench.
    listing = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\ncommands:\n", 1)[1]
    commands = {line.split()[0] for line in listing.splitlines()}
    assert "load" in commands
    assert named <= commands, f"not bench commands: {sorted(named - commands)}"


def _imported_tops(path: Path, own: str) -> Iterator[str]:
    """The top-level packages the module at ``path`` imports, anywhere in it (in
    functions too); a relative import stays within its own top-level package, ``own``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield own if node.level else (node.module or "").split(".")[0]


def _imports_of(folder: str) -> dict[str, set[str]]:
    """Top-level package -> the modules under ``folder`` that import it."""
    found: dict[str, set[str]] = {}
    base = ROOT / "backends" if folder == "backends" else ROOT
    for path in sorted((ROOT / folder).rglob("*.py")):
        own = path.relative_to(base).parts[0]
        for top in _imported_tops(path, own):
            found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_tests_bench_and_testkit_import_only_down() -> None:
    # testkit is the floor both tests/ and bench/ stand on: they import it, and it
    # imports neither; tests/ tests the product, never the bench (bench/tests does).
    tests, bench, testkit = (_imports_of(folder) for folder in DEVELOPMENT_PACKAGES)
    assert "testkit" in tests
    assert "testkit" in bench
    assert "bench" not in tests, f"tests/ imports bench: {sorted(tests['bench'])}"
    assert "tests" not in bench, f"bench/ imports tests: {sorted(bench['tests'])}"
    for upward in ("bench", "tests"):
        assert upward not in testkit, f"testkit imports {upward}: {sorted(testkit[upward])}"


def test_the_product_imports_no_development_package() -> None:
    product = [_imports_of(folder) for folder in ("bridge_store", "backends", "migrations")]
    assert all("bridge_store" in imports for imports in product)
    for imports in product:
        for development in DEVELOPMENT_PACKAGES:
            assert development not in imports, f"{development}: {sorted(imports[development])}"
