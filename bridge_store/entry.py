"""The ``bridge-store`` command's first code: what must happen before the CLI loads.

Loading the CLI takes a few hundred milliseconds, and serve installs its SIGHUP
handler (reload the tokens file) only once the server is being set up. Until then a
SIGHUP took its default action, which ends the process: one sent early in a start,
by a supervisor reloading a fleet or a closing terminal, killed serve. For serve, a
SIGHUP is ignored from here on until serve replaces it with its own; what it would
have reloaded is read at start anyway, and a change after that is seen within a
second by the tokens file's polling, and the price table is read again as soon as
serve follows it if it changed since its first read. ``ui`` (which reads the price
table again on SIGHUP too) is served the same way.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

#: The commands that run a server.
SERVING = frozenset({"serve", "demo", "ui"})


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] and arguments[0] in SERVING:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from .cli import main as cli_main

    return cli_main(argv)
