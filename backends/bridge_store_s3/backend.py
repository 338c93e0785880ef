"""The S3 backend object: one bucket prefix serving every substore."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

from bridge_store.backend.features import QueuedRun
from bridge_store.errors import ConfigurationError

from ._bucket import Bucket
from .errors import PreconditionFailed
from .export_queue import S3ExportQueue
from .keys import Layout
from .leases import S3Leases
from .settings import S3Settings
from .tenants import S3Agents, S3Checkpoints, S3RunEvents, S3Runs

#: Version of the key layout, recorded in ``<prefix>bridge-store.json`` so a future
#: layout change is detected instead of misread.
LAYOUT_VERSION = 1


class S3Backend:
    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._bucket = Bucket(settings)
        self._layout = Layout(settings.prefix)
        self.agents = S3Agents(self._bucket, self._layout)
        self.runs = S3Runs(self._bucket, self._layout)
        self.run_events = S3RunEvents(self._bucket, self._layout)
        self.checkpoints = S3Checkpoints(self._bucket, self._layout)
        self._leases = S3Leases(self._bucket, self._layout)
        self._export_queue = S3ExportQueue(self._bucket, self._layout)

    async def start(self, *, migrate: bool) -> None:
        await self._bucket.start()
        try:
            await self._bucket.check()
            revision = await self.schema_revision()
            if revision is None and migrate:
                await self.upgrade_schema()
            elif revision is not None and revision != str(LAYOUT_VERSION):
                raise ConfigurationError(
                    f"{self.settings.describe()} holds layout version {revision}; "
                    f"this bridge-store reads version {LAYOUT_VERSION}"
                )
        except BaseException:
            await self._bucket.close()
            raise

    async def close(self) -> None:
        await self._bucket.close()

    async def upgrade_schema(self) -> None:
        """Record the layout version; there is nothing to create or convert."""
        body = json.dumps({"layout": LAYOUT_VERSION}).encode()
        # A concurrent start-up may have written it first: same content.
        with contextlib.suppress(PreconditionFailed):
            await self._bucket.put(self._layout.marker(), body, if_none_match=True)

    async def schema_revision(self) -> str | None:
        marker = await self._bucket.get(self._layout.marker())
        if marker is None:
            return None
        return str(json.loads(marker.body).get("layout"))

    async def readiness(self) -> str | None:
        """One GET of the layout marker: the bucket answers, and holds our layout."""
        revision = await self.schema_revision()
        if revision is not None and revision != str(LAYOUT_VERSION):
            return f"the bucket holds layout version {revision}, not {LAYOUT_VERSION}"
        return None

    def pool_stats(self) -> None:
        """obstore keeps its connections to itself."""

    async def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Conditional PUTs of one small object (leases.py)."""
        return await self._leases.acquire(name, holder, seconds)

    async def release_lease(self, name: str, holder: str) -> None:
        await self._leases.release(name, holder)

    async def queue_runs(self, runs: Sequence[QueuedRun]) -> None:
        """One empty object per run, its key in queue order (export_queue.py)."""
        await self._export_queue.queue_runs(runs)

    async def queued_runs(self, limit: int) -> list[QueuedRun]:
        return await self._export_queue.queued_runs(limit)

    async def unqueue_runs(self, runs: Sequence[QueuedRun]) -> None:
        await self._export_queue.unqueue_runs(runs)

    async def queued_count(self) -> int:
        return await self._export_queue.queued_count()
