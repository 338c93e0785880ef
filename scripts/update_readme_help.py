"""Rewrite the CLI help blocks in README.md from the real parser.

Each block sits between ``<!-- help: ARGS -->`` and ``<!-- /help -->`` and holds the
output of ``bridge-store ARGS --help``. tests/test_readme.py fails when a block is
stale; run this script to refresh them.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

from bridge_store.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"(<!-- help: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /help -->)", re.S)
#: argparse wraps to the terminal width; pin it so the README does not depend on it.
HELP_COLUMNS = "100"


def help_text(args: str) -> str:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            build_parser().parse_args([*args.split(), "--help"])
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    return out.getvalue()


def render(readme: str) -> str:
    def replace(match: re.Match[str]) -> str:
        body = f"```\n{help_text(match['args'])}```\n"
        return f"{match.group(1)}{body}{match.group(4)}"

    return BLOCK.sub(replace, readme)


if __name__ == "__main__":
    README.write_text(render(README.read_text()))
    sys.exit(0)
