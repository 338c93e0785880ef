"""WAL checkpoints of a SQLite file on a thread of their own, so no write waits for one.

SQLite checkpoints the WAL in the connection that commits once the log passes 1,000
pages: that commit copies the log into the file and syncs both, milliseconds during
which the writer thread (or the loop, for a loop write) takes no other work. Under
the load bench's realistic mix at 1,000 calls a second that was the SQLite
open-loop p99 (8.7-9.4 ms; 3.4-3.8 ms with no checkpoints at all). The writers'
connections therefore never checkpoint (``wal_autocheckpoint = 0``), and this thread
does, on a connection of its own:

- every :data:`CHECKPOINT_INTERVAL_SECONDS` after a write, a PASSIVE checkpoint,
  which copies what no reader still needs and never waits for a lock;
- once the log holds :data:`RESTART_PAGES` or more (a PASSIVE one cannot let the log
  start over while writers keep adding to it), a RESTART checkpoint, which waits up
  to :data:`RESTART_WAIT_MS` for the writers and readers of the moment, so the next
  write starts the log from its beginning again: the WAL stays bounded under any
  load.

A checkpoint that fails is logged (its SQLite error name, nothing of the data) and
the next one tries again; SQLite's own checkpoint when the last connection closes is
unchanged.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: How often a written file is checkpointed.
CHECKPOINT_INTERVAL_SECONDS = 0.25
#: The log size (pages) at which the log is made to start over (about 40 MiB of log;
#: the WAL file keeps its largest size, 85 MiB under `bench load --mix append`).
RESTART_PAGES = 10_000
#: How long a RESTART checkpoint waits for the writers and readers of the moment.
RESTART_WAIT_MS = 200


class Checkpointer:
    """Checkpoints one SQLite file on a daemon thread while writes happen."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        interval_s: float = CHECKPOINT_INTERVAL_SECONDS,
        restart_pages: int = RESTART_PAGES,
    ) -> None:
        self._connect = connect
        self._interval_s = interval_s
        self._restart_pages = restart_pages
        #: Set by every write; a plain flag, read and cleared by the thread.
        self._written = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="bridge-store-sqlite-checkpointer", daemon=True
        )
        self.checkpoints = 0
        self.restarts = 0

    def start(self) -> None:
        self._thread.start()

    def written(self) -> None:
        """A write committed: the next round checkpoints."""
        self._written = True

    def close(self) -> None:
        """Stop after the round in progress (a checkpoint is never cut off)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while not self._stop.wait(self._interval_s):
                if not self._written:
                    continue
                self._written = False
                if connection is None:
                    # Opened at the first write: a process that only reads has none.
                    connection = self._connect()
                self.checkpoint(connection)
        finally:
            if connection is not None:
                connection.close()

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            _busy, log_pages, _copied = connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            self.checkpoints += 1
            if log_pages >= self._restart_pages:
                connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                self.restarts += 1
        except sqlite3.Error as error:
            logger.warning(
                "SQLite WAL checkpoint failed (%s); the next one tries again",
                getattr(error, "sqlite_errorname", type(error).__name__),
            )


def checkpoint_connection(path: str) -> sqlite3.Connection:
    """The checkpointer's connection: waits :data:`RESTART_WAIT_MS` for a RESTART
    (a PASSIVE checkpoint never waits), and never checkpoints on its own."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute(f"PRAGMA busy_timeout = {RESTART_WAIT_MS}")
    connection.execute("PRAGMA wal_autocheckpoint = 0")
    return connection
