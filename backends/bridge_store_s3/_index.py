"""Documents with sorted index entries, kept consistent with conditional writes only.

A document (an agent, a run) lives at one key, written with user metadata ``rev``: a
random token new with every write. Each list order it appears in has an *index entry*:
an empty object whose key sorts in list order and ends with that ``rev``.

Writes go entries first, document second, old entries last:

* create: put the entries, then the document with ``If-None-Match: *``;
* update: read the document (ETag, old rev), put the new entries, put the document with
  ``If-Match: <ETag>`` (retried from the read on 412), then delete the old entries;
* delete: delete the document, then its entries.

So an entry is *valid* exactly when the document it names exists and carries its rev.
Everything else is stale (a crash between two steps, a lost update race, a failed
clean-up) and readers skip it: listing an index costs one LIST plus one GET per entry,
and every GET doubles as the check. A writer only ever deletes entries with its own
fresh rev or with a rev its successful ``If-Match`` write just replaced, which no
other writer can put back, so a clean-up never removes a live entry.

Stale entries older than :data:`STALE_GRACE` are deleted by the reader that meets
them. A younger one may belong to a write still in flight (entry put, document not
yet); a writer whose document put lands more than half the grace after its entries
puts them again, so a reader can never collect an entry that turns live later.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from bridge_store.errors import ConnectError, already_exists, not_found, unavailable
from bridge_store.types import Document
from bridge_store.wire.jsontext import dumps, loads_document

from ._bucket import Bucket, Listed, backoff
from .errors import PreconditionFailed

log = logging.getLogger("bridge_store_s3")

STALE_GRACE = timedelta(minutes=10)
#: Conditional-write retries before giving up with ``unavailable``: each retry means
#: another writer made progress, so only heavy contention on one key gets here.
MAX_CONFLICTS = 50

T = TypeVar("T")


def new_rev() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class Version:
    """A document as read, with what is needed to replace or delete it safely."""

    doc: Document
    etag: str
    rev: str
    #: Who created the document (its object's metadata; updates carry it over).
    creator: str | None = None


async def put_entries(bucket: Bucket, keys: Sequence[str]) -> None:
    await asyncio.gather(*(bucket.put(key, b"") for key in keys))


async def put_new(
    bucket: Bucket,
    key: str,
    body: bytes,
    rev: str,
    *,
    blob: bool = False,
    creator: str | None = None,
) -> bool:
    """Create ``key`` with ``If-None-Match: *``; False if another object holds it.

    A 412 is checked against ``rev``: our own write answered 412 by the client's retry
    after a lost response is a success. A 412 (or 409 conflict) whose object is gone
    again was a racing write that did not land: try again.
    """
    for attempt in range(MAX_CONFLICTS):
        try:
            await bucket.put(key, body, rev=rev, if_none_match=True, blob=blob, creator=creator)
            return True
        except PreconditionFailed:
            head = await bucket.head(key)
            if head is not None:
                return head.rev == rev
            await backoff(attempt)
    raise unavailable(f"conditional writes to {key} kept conflicting, try again")


async def drop_quietly(bucket: Bucket, keys: Sequence[str], why: str) -> None:
    """Best-effort clean-up: whatever stays behind is stale and skipped by readers."""
    try:
        await bucket.delete(keys)
    except ConnectError as error:
        log.warning("could not delete %d %s: %s", len(keys), why, error.message)


class IndexedDocs:
    """JSON documents at ``key_of(doc)`` with index entries ``entries_of(doc, rev)``."""

    def __init__(
        self,
        bucket: Bucket,
        *,
        kind: str,
        key_of: Callable[[Document], str],
        entries_of: Callable[[Document, str], list[str]],
    ) -> None:
        self.bucket = bucket
        self.kind = kind
        self.key_of = key_of
        self.entries_of = entries_of

    async def read(self, key: str) -> Version | None:
        stored = await self.bucket.get(key)
        if stored is None:
            return None
        return Version(
            doc=loads_document(stored.body),
            etag=stored.etag,
            rev=stored.rev or "",
            creator=stored.creator,
        )

    async def creators(self, keys: Sequence[str]) -> list[str | None]:
        """Who created the documents at ``keys`` (None: absent, or nobody recorded)."""
        heads = await asyncio.gather(*(self.bucket.head(key) for key in keys))
        return [head.creator if head is not None else None for head in heads]

    async def create(self, doc: Document, name: str, creator: str | None = None) -> None:
        rev = new_rev()
        entries = self.entries_of(doc, rev)
        key = self.key_of(doc)
        body = dumps(doc)
        await put_entries(self.bucket, entries)
        started = time.monotonic()
        if not await put_new(self.bucket, key, body, rev, creator=creator):
            await drop_quietly(self.bucket, entries, f"{self.kind} index entries")
            raise already_exists(f"{name} already exists")
        await self._refresh_if_slow(entries, started)

    async def replace(self, doc: Document, name: str) -> None:
        key = self.key_of(doc)
        body = dumps(doc)
        rev = new_rev()
        entries = self.entries_of(doc, rev)
        entries_put_at: float | None = None
        replaced: Version | None = None
        for attempt in range(MAX_CONFLICTS):
            current = await self.read(key)
            if current is not None and current.rev == rev:
                break  # our write landed; its response was lost and the retry saw 412
            if current is None:
                if entries_put_at is not None:
                    await drop_quietly(self.bucket, entries, f"{self.kind} index entries")
                raise not_found(f"{name} not found")
            if entries_put_at is None:
                await put_entries(self.bucket, entries)
                entries_put_at = time.monotonic()
            replaced = current
            try:
                # The creator stays in the metadata of every later write.
                await self.bucket.put(
                    key, body, rev=rev, if_match=current.etag, creator=current.creator
                )
            except PreconditionFailed:
                # Changed or deleted since the read: read again.
                await backoff(attempt)
                continue
            break
        else:
            await drop_quietly(self.bucket, entries, f"{self.kind} index entries")
            raise unavailable(f"{name}: too many concurrent updates, try again")
        if entries_put_at is not None:
            await self._refresh_if_slow(entries, entries_put_at)
        if replaced is not None:
            old = self.entries_of(replaced.doc, replaced.rev)
            await drop_quietly(self.bucket, old, f"replaced {self.kind} index entries")

    async def remove(self, versions: Sequence[Version]) -> None:
        """Delete documents, then their entries (so no entry outlives a live document)."""
        if not versions:
            return
        await self.bucket.delete([self.key_of(version.doc) for version in versions])
        entries = [key for v in versions for key in self.entries_of(v.doc, v.rev)]
        await drop_quietly(self.bucket, entries, f"deleted {self.kind} index entries")

    async def _refresh_if_slow(self, entries: Sequence[str], started: float) -> None:
        if time.monotonic() - started > STALE_GRACE.total_seconds() / 2:
            await put_entries(self.bucket, entries)


Resolver = Callable[[Listed], Awaitable[T | None]]


class IndexScan(Generic[T]):
    """Reads one index in key order, resolving entries and skipping stale ones."""

    def __init__(self, bucket: Bucket, kind: str) -> None:
        self.bucket = bucket
        self.kind = kind

    async def take(
        self, prefix: str, *, start_after: str | None, want: int, resolve: Resolver[T]
    ) -> list[T]:
        """The first ``want`` resolved entries under ``prefix`` after ``start_after``.

        ``resolve`` returns None for a stale entry. Pages are sized to ``want`` so the
        usual page (no stale entries) is one LIST and ``want`` GETs fetched together.
        """
        found: list[T] = []
        stale: list[str] = []
        cutoff = datetime.now(UTC) - STALE_GRACE
        while len(found) < want:
            page, more = await self.bucket.list_page(
                prefix, start_after=start_after, max_keys=want - len(found)
            )
            resolved = await asyncio.gather(*(resolve(item) for item in page))
            for item, value in zip(page, resolved, strict=True):
                if value is not None:
                    found.append(value)
                elif item.last_modified < cutoff:
                    stale.append(item.key)
            if not more:
                break
            start_after = page[-1].key
        if stale:
            await drop_quietly(self.bucket, stale, f"stale {self.kind} index entries")
        return found[:want]
