"""The price table a server prices with: read at start, read again on SIGHUP.

``serve`` reads the file once before it listens (a mistake stops the start, in one
line) and then whenever it gets SIGHUP; under ``serve --workers N`` the parent passes
SIGHUP on to every worker, and each reads the file itself. A reload runs in one task
of the event loop that reads and parses the file on a worker thread and swaps the
table in one assignment, like the tokens file's (``security.auth.TokenRegistry``):
pages keep answering meanwhile, and SIGHUPs that come during a read make one more
read after it. A file that cannot be read or has a mistake keeps the table read last
and logs the one line naming the mistake (never a price); the overview says so too.
Nothing is cached from the table: every page prices with the table of the moment.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from ..errors import ConfigurationError
from .loader import load_prices
from .table import PriceTable

logger = logging.getLogger("bridge_store.prices")


class PriceBook:
    """The current :class:`PriceTable` (None: no ``--prices``) and its file."""

    def __init__(self, table: PriceTable | None, path: Path | None = None) -> None:
        self._table = table
        self._path = path
        #: The file's modification time, size and inode as it was before its last read.
        self._stamp = _stamp(path) if path is not None else None
        #: Why the last read of the file was not taken (None: it was).
        self.problem: str | None = None
        # Set by request_reload (from a signal handler too: a plain assignment);
        # cleared by the reload task as it starts a read.
        self._wanted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def read(cls, path: str | Path | None) -> PriceBook:
        """The book of the file at ``path`` (ConfigurationError, one line, if it is
        wrong); an empty book without one."""
        if not path:
            return cls(None)
        stamp = _stamp(Path(path))
        book = cls(load_prices(path), Path(path))
        book._stamp = stamp  # as it was before the read: a change during it reads again
        return book

    @property
    def table(self) -> PriceTable | None:
        return self._table

    @property
    def path(self) -> Path | None:
        return self._path

    def reload(self) -> bool:
        """Read the file now, on this thread; True if its table was taken. For callers
        without an event loop; a server calls :meth:`request_reload`."""
        if self._path is None:
            return False
        return self._take(self._read())

    def follow_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Reload in tasks of ``loop`` from now on. A request made before is served now,
        and so is a change of the file since it was read (a SIGHUP sent while the
        server started, before it listened for one, is not lost)."""
        if self._path is None:
            return
        self._loop = loop
        if self._wanted or _stamp(self._path) != self._stamp:
            self._wanted = True
            self._start_task()

    def request_reload(self) -> None:
        """Ask for a reload soon; safe from a signal handler and from any thread.
        Without a loop to follow yet, the request waits for :meth:`follow_on`."""
        if self._path is None:
            return
        self._wanted = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._start_task()
        else:
            loop.call_soon_threadsafe(self._start_task)

    def _start_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._reload_while_wanted(), name="prices-file-reload"
            )

    async def _reload_while_wanted(self) -> None:
        while self._wanted:
            self._wanted = False
            self._take(await asyncio.to_thread(self._read))

    def _read(self) -> PriceTable | ConfigurationError:
        assert self._path is not None
        self._stamp = _stamp(self._path)
        try:
            return load_prices(self._path)
        except ConfigurationError as error:
            return error

    def _take(self, read: PriceTable | ConfigurationError) -> bool:
        if isinstance(read, ConfigurationError):
            self.problem = str(read)
            logger.error("price table not reloaded, the previous prices stay: %s", read)
            return False
        self._table, self.problem = read, None
        digest = read.version.digest if read.version is not None else "-"
        logger.info("price table %s reloaded: version %s", self._path, digest)
        return True


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is rewritten: modification time, size and inode."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)
