"""runEvents on S3: one object per event at a key ordered by seq, claimed with
``If-None-Match: *``.

Appending seq n+1 is a conditional put of ``e/<n+1>``: of all racing appenders exactly
one wins, the others get 412, list the log's tail and try the next seq. seq n+1 is
only ever tried by an appender that has seen seq n, so the log stays gapless.

Idempotency keys use a claim object ``k/<key>`` holding the whole event and the seq it
is meant for, created with ``If-None-Match: *`` *before* the event is written. Whoever
finds a claim (a retry, a racing duplicate, the claimant itself) completes it: put the
claim's event at the claim's seq; if that seq went to another event, move the claim
past the log's end with ``If-Match`` and try again. The claim's seq only moves after
its event is proven absent at the old seq, so the event lands exactly once, and a
claimant that crashed after claiming is finished by the next retry. The cost: a keyed
append stores its event twice (claim and log) and costs one more PUT.

Within one process, appends to one run are serialised by a lock and the run's last
seq is cached (checked with a HEAD before use, since another process may have deleted
the run), so the usual append is HEAD + PUT, and 412 races only happen between
processes.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence

from bridge_store.backend.substores import appended_event, duplicate_key, restorable, stored_event
from bridge_store.errors import unavailable
from bridge_store.types import Document
from bridge_store.wire.jsontext import dumps, loads_document

from ._bucket import Bucket
from ._index import MAX_CONFLICTS, new_rev
from .errors import PreconditionFailed
from .keys import Layout, seq_of, unhex_id

#: Runs whose last seq this process remembers; older ones are listed again when needed.
_CACHED_RUNS = 4096


class _ClaimLost(Exception):
    """The claim or an event vanished mid-append: the run was deleted; start over."""


class _RunLocks:
    """One asyncio lock per run id, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(run_id, (asyncio.Lock(), 0))
        self._locks[run_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[run_id]
            if users == 1:
                del self._locks[run_id]
            else:
                self._locks[run_id] = (lock, users - 1)


class TenantRunEvents:
    """One tenant's events: everything under its layout's prefix."""

    def __init__(self, bucket: Bucket, layout: Layout) -> None:
        self._bucket = bucket
        self._layout = layout
        self._locks = _RunLocks()
        self._last_seq: OrderedDict[str, int] = OrderedDict()

    # -- append ------------------------------------------------------------------------

    async def append(self, event: Document) -> Document:
        run_id, key = event["runId"], event["idempotencyKey"]
        async with self._locks.hold(run_id):
            if key is None:
                return await self._append_plain(run_id, event)
            for _ in range(MAX_CONFLICTS):
                try:
                    return await self._append_keyed(run_id, key, event)
                except _ClaimLost:
                    self._last_seq.pop(run_id, None)
            raise unavailable(f"run {run_id}: appends kept racing deletes, try again")

    async def _append_plain(self, run_id: str, event: Document) -> Document:
        last = await self._known_last(run_id)
        token = new_rev()
        for _ in range(MAX_CONFLICTS):
            seq = last + 1
            stored = stored_event(event, seq)
            key = self._layout.event(run_id, seq)
            try:
                await self._bucket.put(key, dumps(stored), rev=token, if_none_match=True)
            except PreconditionFailed:
                head = await self._bucket.head(key)
                if head is None or head.rev != token:
                    last = await self._scan_last(run_id, after=last)
                    continue
                # Ours after all: a retried put whose first response was lost.
            self._remember(run_id, seq)
            return stored
        raise unavailable(f"run {run_id}: too many concurrent appends, try again")

    async def _append_keyed(self, run_id: str, idempotency_key: str, event: Document) -> Document:
        claim_key = self._layout.claim(run_id, idempotency_key)
        seq = await self._known_last(run_id) + 1
        try:
            etag = await self._bucket.put(
                claim_key, dumps({"event": event, "seq": seq}), if_none_match=True
            )
        except PreconditionFailed:
            # Claimed before (or by our own retried put): finish that claim instead.
            claim = await self._bucket.get(claim_key)
            if claim is None:
                raise _ClaimLost from None
            data = loads_document(claim.body)
            event, seq, etag = data["event"], data["seq"], claim.etag
        return await self._settle(run_id, claim_key, event, seq, etag)

    async def _settle(
        self, run_id: str, claim_key: str, event: Document, seq: int, etag: str
    ) -> Document:
        """Put a claim's event into the log, once, moving the claim when seq is taken."""
        for _ in range(MAX_CONFLICTS):
            stored = stored_event(event, seq)
            key = self._layout.event(run_id, seq)
            try:
                await self._bucket.put(key, dumps(stored), if_none_match=True)
            except PreconditionFailed:
                occupant = await self._bucket.get(key)
                if occupant is None:
                    raise _ClaimLost from None
                if loads_document(occupant.body) != stored:
                    last = await self._scan_last(run_id, after=seq)
                    event, seq, etag = await self._move_claim(claim_key, event, last + 1, etag)
                    continue
            self._remember(run_id, seq)
            return stored
        raise unavailable(f"run {run_id}: too many concurrent appends, try again")

    async def _move_claim(
        self, claim_key: str, event: Document, seq: int, etag: str
    ) -> tuple[Document, int, str]:
        """Point the claim at ``seq``; if someone moved it first, follow them instead."""
        try:
            new_etag = await self._bucket.put(
                claim_key, dumps({"event": event, "seq": seq}), if_match=etag
            )
        except PreconditionFailed:
            claim = await self._bucket.get(claim_key)
            if claim is None:
                raise _ClaimLost from None
            data = loads_document(claim.body)
            return data["event"], data["seq"], claim.etag
        return event, seq, new_etag

    # -- restore -----------------------------------------------------------------------

    async def restore(self, run_id: str, events: Sequence[Document]) -> int:
        async with self._locks.hold(run_id):
            new = restorable(run_id, events, await self._known_last(run_id))
            keyed = [event for event in new if event["idempotencyKey"] is not None]
            claims = await asyncio.gather(
                *(
                    self._bucket.get(self._layout.claim(run_id, event["idempotencyKey"]))
                    for event in keyed
                )
            )
            for event, claim in zip(keyed, claims, strict=True):
                if claim is not None and loads_document(claim.body)["seq"] != event["seq"]:
                    raise duplicate_key(run_id, event["idempotencyKey"])
            # Claims first, as an append makes them, then the events one at a time in
            # seq order, so that an interrupted restore leaves a shorter gapless log.
            await asyncio.gather(
                *(
                    self._bucket.put(
                        self._layout.claim(run_id, event["idempotencyKey"]),
                        dumps({"event": appended_event(event), "seq": event["seq"]}),
                    )
                    for event, claim in zip(keyed, claims, strict=True)
                    if claim is None
                )
            )
            for event in new:
                try:
                    await self._bucket.put(
                        self._layout.event(run_id, event["seq"]), dumps(event), if_none_match=True
                    )
                except PreconditionFailed:
                    raise unavailable(f"run {run_id}: appended to while restored") from None
                self._remember(run_id, event["seq"])
            return len(new)

    # -- the log's tail ----------------------------------------------------------------

    async def _known_last(self, run_id: str) -> int:
        cached = self._last_seq.get(run_id)
        if cached is not None and (
            cached == 0 or await self._bucket.head(self._layout.event(run_id, cached)) is not None
        ):
            return cached
        return await self._scan_last(run_id, after=0)

    async def _scan_last(self, run_id: str, *, after: int) -> int:
        """The last seq of the run, listing from ``after`` (a seq known to exist, or 0)."""
        last = after
        start = self._layout.event(run_id, after) if after > 0 else None
        async for key in self._bucket.iter_keys(
            self._layout.events_of_run(run_id), start_after=start
        ):
            last = seq_of(key)
        self._remember(run_id, last)
        return last

    def _remember(self, run_id: str, seq: int) -> None:
        self._last_seq[run_id] = max(seq, self._last_seq.get(run_id, 0))
        self._last_seq.move_to_end(run_id)
        if len(self._last_seq) > _CACHED_RUNS:
            self._last_seq.popitem(last=False)

    # -- list and delete ---------------------------------------------------------------

    async def list(self, run_id: str, *, after_seq: int, limit: int) -> list[Document]:
        # A GET of the next seq answers the usual poll (nothing new) without a LIST:
        # the log is gapless, so if after_seq + 1 is absent nothing follows.
        first_key = self._layout.event(run_id, after_seq + 1)
        first = await self._bucket.get(first_key)
        if first is None:
            return []
        events = [loads_document(first.body)]
        if limit == 1:
            return events
        page, _ = await self._bucket.list_page(
            self._layout.events_of_run(run_id), start_after=first_key, max_keys=limit - 1
        )
        # Stop at any hole: only a delete racing this read can make one.
        keys: builtins.list[str] = []
        for offset, item in enumerate(page):
            if seq_of(item.key) != after_seq + 2 + offset:
                break
            keys.append(item.key)
        bodies = await asyncio.gather(*(self._bucket.get(key) for key in keys))
        for body in bodies:
            if body is None:
                break
            events.append(loads_document(body.body))
        return events

    async def delete(self, run_ids: Sequence[str] | None) -> None:
        if run_ids is not None:
            for run_id in run_ids:
                log = [k async for k in self._bucket.iter_keys(self._layout.run_log(run_id))]
                await self._delete_log(run_id, log)
            return
        prefix = self._layout.all_events()
        current: str | None = None
        keys: builtins.list[str] = []
        async for key in self._bucket.iter_keys(prefix):
            run_hex = key[len(prefix) :].split("/", 1)[0]
            if run_hex != current:
                if current is not None:
                    await self._delete_log(unhex_id(current), keys)
                current, keys = run_hex, []
            keys.append(key)
        if current is not None:
            await self._delete_log(unhex_id(current), keys)

    async def _delete_log(self, run_id: str, keys: builtins.list[str]) -> None:
        # Claims first, so no claim outlives its event and replays it into a new log;
        # then events from the highest seq down, so an interrupted delete leaves a
        # shorter gapless log, never a log with a hole at its start.
        claims_prefix = self._layout.claims_of_run(run_id)
        claims = [key for key in keys if key.startswith(claims_prefix)]
        events = [key for key in keys if not key.startswith(claims_prefix)]
        async with self._locks.hold(run_id):
            await self._bucket.delete(claims)
            await self._bucket.delete(reversed(events))
            self._last_seq.pop(run_id, None)
