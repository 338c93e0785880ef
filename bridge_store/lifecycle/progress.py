"""Showing a long copy, import or export: a live table on a terminal, a line otherwise.

On a terminal (``rich``): one row per substore with its items, bytes and rate, and an
agents row with a bar and the time left (the only total known up front: counting
everything else would cost a pass over the whole store). Elsewhere (a log, a pipe)
only the summary line at the end is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import TextIO

from rich import filesize
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from bridge_store.backend.substores import SUBSTORE_NAMES

from .tally import Tally

#: Seconds between refreshes of the live table.
REFRESH = 0.5


class Meter:
    """Counts agents done and shows the tally as it grows."""

    def __init__(self, tally: Tally, *, verb: str, stream: TextIO | None = None) -> None:
        self.tally = tally
        self.verb = verb
        self.agents_done = 0
        self.agents_total: int | None = None
        self._stream = stream if stream is not None else sys.stderr
        self._started = time.monotonic()
        self._progress: Progress | None = None
        self._rows: dict[str, TaskID] = {}

    @property
    def live(self) -> bool:
        return self._stream.isatty()

    def agent_done(self) -> None:
        self.agents_done += 1

    @contextlib.asynccontextmanager
    async def showing(self) -> AsyncIterator[Meter]:
        if not self.live:
            yield self
            return
        progress = Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[size]:>10}"),
            TextColumn("{task.fields[rate]:>12}"),
            TimeRemainingColumn(),
            console=Console(file=self._stream),
            auto_refresh=False,
        )
        self._progress = progress
        self._rows = {"agents": progress.add_task("agents", total=None, size="", rate="")}
        for name in SUBSTORE_NAMES[1:]:
            self._rows[name] = progress.add_task(name, total=None, size="", rate="")
        with progress:
            refresher = asyncio.create_task(self._refresh_every())
            try:
                yield self
            finally:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher
                self.refresh()

    async def _refresh_every(self) -> None:
        while True:
            self.refresh()
            await asyncio.sleep(REFRESH)

    def refresh(self) -> None:
        progress = self._progress
        if progress is None:
            return
        elapsed = max(time.monotonic() - self._started, 1e-9)
        progress.update(
            self._rows["agents"],
            completed=self.agents_done,
            total=self.agents_total,
            rate=f"{self.agents_done / elapsed:,.1f}/s",
        )
        for name in SUBSTORE_NAMES[1:]:
            items = self.tally.items(name)
            progress.update(
                self._rows[name],
                completed=items,
                size=filesize.decimal(self.tally.sizes[name]),
                rate=f"{items / elapsed:,.0f}/s",
            )
        progress.refresh()

    def summary(self) -> str:
        """The line printed at the end: what became of each substore's items, and speed."""
        elapsed = time.monotonic() - self._started
        items = sum(self.tally.items(name) for name in SUBSTORE_NAMES)
        size = filesize.decimal(sum(self.tally.sizes.values()))
        rate = items / elapsed if elapsed > 0 else 0.0
        return (
            f"{self.verb}: {self.tally.summary()}; {size} in {elapsed:.1f} s ({rate:,.0f} items/s)"
        )
