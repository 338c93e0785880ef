"""``python -m bench COMMAND [options]``: run one benchmark module's ``main``.

Each command is a module ``bench/COMMAND.py`` (dashes become underscores) with a
``main(argv: list[str]) -> int``; a new benchmark needs no registration here.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def _commands() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        info.name.replace("_", "-")
        for info in pkgutil.iter_modules([str(here)])
        if not info.name.startswith("_") and _has_main(info.name)
    )


def _has_main(module_name: str) -> bool:
    source = (Path(__file__).parent / f"{module_name}.py").read_text(encoding="utf-8")
    return "\ndef main(argv" in source


def main(argv: list[str]) -> int:
    commands = _commands()
    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: python -m bench COMMAND [options]\n\ncommands:\n  " + "\n  ".join(commands))
        return 0 if argv else 2
    command = argv[0]
    if command not in commands:
        print(f"python -m bench: unknown command {command!r}; one of: {', '.join(commands)}")
        return 2
    module = importlib.import_module(f"bench.{command.replace('-', '_')}")
    status: int = module.main(argv[1:])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
