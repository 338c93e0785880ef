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
from collections.abc import Iterator, Mapping
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
    # Every folder of bridge_store/ is a home of the modules the paragraph names.
    homes += sorted(init.parent for init in (ROOT / "bridge_store").glob("*/__init__.py"))
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


def module_names() -> dict[str, Path]:
    """Every module of the product by its import name (``bridge_store.cli.serve``)."""
    names: dict[str, Path] = {}
    tops = [ROOT / "bridge_store", *sorted((ROOT / "backends").iterdir())]
    for top in tops:
        for path in top.rglob("*.py"):
            if "_generated" in path.parts:
                continue
            parts = [top.name, *path.relative_to(top).with_suffix("").parts]
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of ``modules`` that module ``name`` imports, wherever (its top,
    functions, TYPE_CHECKING): ``from .x import y`` is ``x``, or ``x.y`` if a module."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*(base if node.level else []), *filter(None, [node.module])])
            named.extend(f"{module}.{alias.name}" for alias in node.names)
    found = set()
    for imported in named:
        if imported.startswith("bridge_store._generated."):
            continue  # generated protobuf code, which imports nothing of the package
        while imported and imported not in modules:
            imported = imported.rpartition(".")[0]
        if imported and imported != name:
            found.add(imported)
    return found


def test_no_command_imports_another() -> None:
    # What commands share lives in cli/shared/; a command importing another drags its
    # parser and its run in, and hides what they share.
    modules = module_names()
    commands = {
        name
        for name, path in modules.items()
        if name.startswith("bridge_store.cli.")
        and path.parent.name == "cli"
        and path.name != "__init__.py"
    }
    assert "bridge_store.cli.serve" in commands
    crossing = {
        name: sorted(imports_of(name, modules[name], modules) & commands) for name in commands
    }
    assert {name: found for name, found in crossing.items() if found} == {}


#: The layers, bottom first, each a set of folders: of bridge_store/, and the built-in
#: backends' packages. A module imports only from its own layer and those below (the
#: README's layout paragraph names them). The modules at the root of bridge_store/ are
#: the bottom layer, what every layer uses, but for the package's face (:data:`FACE`).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("what every layer uses", ("",)),
    ("bytes on the wire, and the rules of its fields", ("wire",)),
    ("a checkout's workspace, as store URLs name it", ("workspaces",)),
    ("the backend API, and the price table its summaries are priced with", ("backend", "pricing")),
    ("the store stack", ("stack",)),
    ("access: who calls, what they may see", ("security",)),
    ("the request path", ("rpc",)),
    (
        "the backends",
        ("bridge_store_memory", "bridge_store_sql", "bridge_store_redis", "bridge_store_s3"),
    ),
    (
        "what runs over the stores",
        ("lifecycle", "ops", "conformance", "viewer", "run_traces", "demo"),
    ),
    ("the server", ("server",)),
    ("the edges", ("cli", "client")),
]
#: The root's modules that are the package's face rather than its floor, and the
#: layer each stands in: the package itself (``hookimpl``, ``__version__``) and the
#: old paths of the backend API, which re-export it; the console script.
FACE = {
    "bridge_store": "backend",
    "substores": "backend",
    "hookspecs": "backend",
    "entry": "cli",
    "__main__": "cli",
}
#: At most this many modules at the root: the package's face and what every layer uses.
MAX_ROOT_MODULES = 12


def layer_of(name: str) -> int:
    short = name.removeprefix("bridge_store.") if name != "bridge_store" else name
    top = short.split(".")[0]
    if top.startswith("bridge_store_") or (ROOT / "bridge_store" / top).is_dir():
        folder = top  # a backend's package, or a folder of bridge_store/
    else:
        folder = FACE.get(short, "")  # a module at the root
    for number, (_, folders) in enumerate(LAYERS):
        if folder in folders:
            return number
    raise AssertionError(f"{name}: its folder {folder} is in no layer of LAYERS: add it")


def test_every_folder_is_a_layer_and_the_root_is_small() -> None:
    packages = {
        init.parent.name
        for init in (ROOT / "bridge_store").glob("*/__init__.py")
        if init.parent.name != "_generated"
    }
    placed = {folder for _, folders in LAYERS for folder in folders}
    assert "server" in packages
    assert packages - placed == set(), "place these folders in LAYERS"
    root = sorted(path.stem for path in (ROOT / "bridge_store").glob("*.py"))
    assert "errors" in root
    assert len(root) <= MAX_ROOT_MODULES, f"the root holds {len(root)} modules: {root}"


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_no_import_runs_up_a_layer() -> None:
    graph = import_graph()
    upward = sorted(
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {imported}"
        for name, imported_names in graph.items()
        for imported in imported_names
        if layer_of(imported) > layer_of(name)
    )
    assert "bridge_store.server.app" in graph
    assert upward == []


def test_no_imports_form_a_cycle() -> None:
    # Function-level and TYPE_CHECKING imports count: a cycle is a cycle to a reader.
    graph = import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for imported in sorted(graph[name]):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state and (cycle := visit(imported)) is not None:
                return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            assert visit(name) is None, f"import cycle: {' -> '.join(path)}"
