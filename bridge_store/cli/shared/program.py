"""This program as the person who started it can run it again, for commands a page
shows (the empty store's page prints the command that connects a bridge).

After the README's install the virtualenv is never activated, so ``bridge-store`` is
not on the PATH: the page says ``.venv/bin/bridge-store`` then, as it was typed. Run
as ``python -m bridge_store``, it says that, with the interpreter's own path.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

NAME = "bridge-store"


def this_program(
    argv0: str | None = None,
    executable: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> str:
    """``bridge-store`` when that name on the PATH is this program; else its path
    (relative to ``cwd`` when under it), or ``PYTHON -m bridge_store``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    environ = os.environ if environ is None else environ
    cwd = os.getcwd() if cwd is None else cwd
    if Path(argv0).name == "__main__.py":
        python = shown(executable or sys.executable, cwd)
        return f"{python} -m bridge_store"
    running = os.path.abspath(os.path.join(cwd, argv0))
    found = shutil.which(NAME, path=environ.get("PATH", ""))
    if found is not None and os.path.abspath(os.path.join(cwd, found)) == running:
        return NAME
    return shown(running, cwd)


def shown(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it is under it (``.venv/bin/bridge-store``),
    else absolute; quoted for a shell when it needs to be."""
    absolute = Path(os.path.abspath(os.path.join(cwd, path)))
    try:
        text = str(absolute.relative_to(cwd))
    except ValueError:
        text = str(absolute)
    return shlex.quote(text)
