"""Rewrite the CLI help blocks in docs/cli.md from the real parser.

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

CLI_DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
BLOCK = re.compile(r"(<!-- help: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /help -->)", re.S)
#: argparse wraps to the terminal width; pin it so the page does not depend on it.
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


def render(page: str) -> str:
    def replace(match: re.Match[str]) -> str:
        body = f"```\n{help_text(match['args'])}```\n"
        return f"{match.group(1)}{body}{match.group(4)}"

    return BLOCK.sub(replace, page)


if __name__ == "__main__":
    CLI_DOCS.write_text(render(CLI_DOCS.read_text()))
    sys.exit(0)
