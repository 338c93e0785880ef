"""``serve --retain``: the prune of :mod:`.prune`, in the background, one server at a time.

Every server started with ``--retain`` runs a pass about once an interval (an hour by
default, each wait drawn within 10% of it, and the first within the first tenth, so a
fleet restarted at once does not knock on the backend at once). A pass first takes
the lease :data:`LEASE_NAME` on the backend serving the agents substore; a server that
does not get it skips the pass, so of a fleet sharing a backend one prunes at a time.
The holder renews the lease between agents and stops when it has lost it; a holder
that dies frees it when its lease runs out (or at once, for a Postgres advisory lock).

A pass is bounded: it stops after one interval at the most, and what it had not
reached waits for the next (a prune resumes where it stopped). Stopping the server
cancels the pass between two backend calls and releases the lease. Each pass logs one
INFO line (counts and a duration: never a document) and updates the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import secrets
import socket
import time
from dataclasses import dataclass

from ..backend.features import Leases
from ..backend.substores import Backend
from ..errors import ConfigurationError, ConnectError
from ..stack.stores import Stores
from .durations import describe_age
from .prune import PruneCriteria, prune

logger = logging.getLogger("bridge_store.retention")

LEASE_NAME = "retention"
#: How long a lease lasts without renewal; a pass renews it once a third has gone.
LEASE_SECONDS = 300.0
#: Seconds between passes by default (``--retain-every``).
DEFAULT_INTERVAL = 3600.0
#: Waits are drawn within this share of the interval.
JITTER = 0.1
#: The principal name retention's deletes carry in the audit log.
PRINCIPAL_NAME = "retention"


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """Prune agents not updated for ``older_than`` seconds, every ``interval`` seconds."""

    older_than: float
    interval: float = DEFAULT_INTERVAL

    def __post_init__(self) -> None:
        if not (self.older_than > 0 and self.interval > 0):
            raise ConfigurationError("--retain and --retain-every must be positive ages")


class RetentionCounts:
    """What the passes did so far; the metrics read it (see :mod:`bridge_store.ops.metrics`)."""

    def __init__(self) -> None:
        self.passes = {"pruned": 0, "skipped": 0, "failed": 0}
        self.agents = 0
        self.runs = 0
        self.blobs = 0
        self.last_success: float | None = None


def lease_holder() -> str:
    """This server's name on the lease: host, process and a random part."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:60]
    return f"{host}:{os.getpid()}:{secrets.token_hex(4)}"


def lease_backend(backend: Backend, description: str) -> Leases:
    """``backend`` if it can hold a lease; ConfigurationError naming the fix otherwise."""
    if not isinstance(backend, Leases):
        raise ConfigurationError(
            f"--retain needs leases, which the agents backend {description} does not "
            "provide: run `bridge-store prune` from one place on a schedule instead"
        )
    return backend


class Retention:
    """The background pruning of one server."""

    def __init__(
        self,
        stores: Stores,
        backend: Leases,
        settings: RetentionSettings,
        counts: RetentionCounts | None = None,
        *,
        holder: str | None = None,
    ) -> None:
        self._stores = stores
        self._backend = backend
        self.settings = settings
        self.counts = counts if counts is not None else RetentionCounts()
        self.holder = holder if holder is not None else lease_holder()
        self._task: asyncio.Task[None] | None = None
        self._renewed = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run_forever())

    async def stop(self) -> None:
        """Cancel the loop (and a pass under way, which releases the lease) and wait."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if (current := asyncio.current_task()) is not None and current.cancelling():
                raise  # our own caller is being cancelled, not just the loop

    async def _run_forever(self) -> None:
        interval = self.settings.interval
        delay = random.uniform(0, interval * JITTER)
        while True:
            await asyncio.sleep(delay)
            await self.run_pass()
            delay = interval * random.uniform(1 - JITTER, 1 + JITTER)

    async def run_pass(self) -> str:
        """One pass: ``pruned``, ``skipped`` (another server holds the lease) or ``failed``."""
        started = time.monotonic()
        age = describe_age(self.settings.older_than)
        try:
            async with asyncio.timeout(self.settings.interval):
                outcome = await self._pass(age, started)
        except (ConnectError, TimeoutError) as error:
            reason = error.message if isinstance(error, ConnectError) else "it ran out of time"
            logger.warning(
                "retention pass failed after %.1f s: %s; the next pass goes on",
                time.monotonic() - started,
                reason,
            )
            outcome = "failed"
        except Exception:
            # A bug, not an outage: said with its trace, and the loop goes on.
            logger.exception("retention pass failed")
            outcome = "failed"
        self.counts.passes[outcome] += 1
        return outcome

    async def _pass(self, age: str, started: float) -> str:
        backend = self._backend
        if not await backend.acquire_lease(LEASE_NAME, self.holder, LEASE_SECONDS):
            logger.info("retention pass skipped: another server holds the retention lease")
            return "skipped"
        self._renewed = time.monotonic()
        try:
            criteria = PruneCriteria(cutoff_ms=int((time.time() - self.settings.older_than) * 1000))
            report = await prune(
                self._stores, criteria, principal_name=PRINCIPAL_NAME, keep_going=self._renew
            )
        finally:
            await backend.release_lease(LEASE_NAME, self.holder)
        counts = self.counts
        counts.agents += len(report.agents)
        counts.runs += report.runs
        counts.blobs += report.blobs
        counts.last_success = time.time()
        logger.info(
            "retention pass: pruned %d agents not updated for %s (%d runs, %d blobs) in "
            "%.1f s; %d with an active run kept",
            len(report.agents),
            age,
            report.runs,
            report.blobs,
            time.monotonic() - started,
            report.skipped_active,
        )
        return "pruned"

    async def _renew(self) -> bool:
        if time.monotonic() - self._renewed < LEASE_SECONDS / 3:
            return True
        held = await self._backend.acquire_lease(LEASE_NAME, self.holder, LEASE_SECONDS)
        self._renewed = time.monotonic()
        if not held:
            logger.warning("retention pass stopped: the retention lease was lost")
        return held
