"""A table of rows in Redis: documents in one hash, ordered indexes in sorted sets.

Agents and runs are such tables; they differ only in how they encode their fields and
index members (see :mod:`bridge_store_redis.keys`). Checkpoints keep their blobs in
keys of their own but read their indexes the same way (:func:`read_ranges`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from redis.asyncio import Redis, RedisCluster

from bridge_store.backend.tenants import DEFAULT_TENANT

from .keys import TOP, KeySpace, TableKeys
from .scripts import Scripts

T = TypeVar("T")

#: Rows a delete-by-filter removes per script call: each call is atomic and leaves no
#: orphan index entries, and a batch this size keeps Redis responsive meanwhile.
DELETE_BATCH = 500


@dataclass(frozen=True, slots=True)
class Range:
    """Members of one index between two ZRANGE BYLEX bounds, and how to find their rows.

    The row field of a member is ``before + member[skip:] + after``.
    """

    low: bytes
    high: bytes
    skip: int = 0
    before: bytes = b""
    after: bytes = b""

    @classmethod
    def starting_with(cls, prefix: bytes, **recipe: Any) -> Range:
        """Every member that starts with ``prefix``."""
        return cls(low=b"[" + prefix, high=b"[" + prefix + TOP, **recipe)

    def with_low(self, low: bytes) -> Range:
        return dataclasses.replace(self, low=low)

    def args(self) -> list[bytes | int]:
        return [self.low, self.high, self.skip, self.before, self.after]


@dataclass(frozen=True, slots=True)
class Row:
    field: bytes
    value: bytes | None


class RowTable:
    def __init__(self, client: Redis | RedisCluster, keys: TableKeys, scripts: Scripts) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts

    async def get(self, field: bytes) -> bytes | None:
        return cast("bytes | None", await self._client.hget(self._keys.docs, field))

    async def get_many(self, fields: Sequence[bytes]) -> list[bytes | None]:
        if not fields:
            return []
        values = await self._client.hmget(self._keys.docs, list(fields))
        return cast("list[bytes | None]", values)

    async def put(
        self,
        mode: Literal["create", "update"],
        field: bytes,
        value: bytes,
        members: Sequence[bytes],
        creator: str | None = None,
    ) -> bool:
        """Write a row and its index members; False if it exists (create) / is missing (update).

        ``creator`` is recorded beside a created row (an update keeps the row's)."""
        done = await self._scripts.put_row(
            keys=self._keys.all(), args=[mode, field, value, creator or "", *members]
        )
        return bool(done)

    async def creators(self, fields: Sequence[bytes]) -> list[bytes | None]:
        """Who created each of these rows (None: nobody recorded)."""
        if not fields:
            return []
        values = await self._client.hmget(self._keys.creators, list(fields))
        return cast("list[bytes | None]", values)

    async def remove(
        self, fields: Sequence[bytes], *, check: tuple[int, bytes] | None = None
    ) -> None:
        """Delete the given rows; with ``check=(index, prefix)`` only those whose member
        of that index (1-based) starts with ``prefix``, decided atomically with the delete."""
        index, prefix = check if check is not None else (0, b"")
        for start in range(0, len(fields), DELETE_BATCH):
            batch = fields[start : start + DELETE_BATCH]
            await self._scripts.remove_rows(keys=self._keys.all(), args=[index, prefix, *batch])

    async def remove_range(self, index: int, span: Range) -> None:
        """Delete every row whose member of ``index`` (1-based) lies in ``span``."""
        while True:
            removed = await self._scripts.remove_range(
                keys=self._keys.all(),
                args=[index, span.low, span.high, span.skip, span.before, span.after, DELETE_BATCH],
            )
            if int(removed) < DELETE_BATCH:
                return

    async def read(
        self, index: int, spans: Sequence[Range], *, limit: int, reverse: bool = False
    ) -> list[list[Row]]:
        """Up to ``limit`` rows (with documents) of each span of index ``index`` (1-based)."""
        return await read_ranges(
            self._scripts,
            self._keys.indexes[index - 1],
            spans,
            limit=limit,
            reverse=reverse,
            docs=self._keys.docs,
        )


async def read_ranges(
    scripts: Scripts,
    index: str,
    spans: Sequence[Range],
    *,
    limit: int,
    reverse: bool = False,
    docs: str | None = None,
) -> list[list[Row]]:
    """Up to ``limit`` rows of each span, in index order (descending if ``reverse``),
    read in one atomic step; each row's document from the hash ``docs`` if given."""
    if not spans:
        return []
    args: list[bytes | int] = [int(reverse), limit]
    for span in spans:
        args.extend(span.args())
    keys = [index] if docs is None else [index, docs]
    result: list[list[Any]] = await scripts.read_ranges(keys=keys, args=args)
    pages: list[list[Row]] = []
    for found in result:
        fields: list[bytes] = found[0]
        values: list[bytes | None] = found[1] if len(found) > 1 else [None] * len(fields)
        pages.append([Row(field, value) for field, value in zip(fields, values, strict=True)])
    return pages


class Tenants(Generic[T]):
    """One object per tenant (a table, a set of key names), made when first used."""

    def __init__(self, new: Callable[[str], T]) -> None:
        self._new = new
        self._made: dict[str, T] = {}

    def of(self, tenant: str) -> T:
        made = self._made.get(tenant)
        if made is None:
            made = self._made[tenant] = self._new(tenant)
        return made


async def tenants_holding(
    client: Redis | RedisCluster, keys: KeySpace, substore: str, suffix: str
) -> list[str]:
    """The tenants whose key ``suffix`` of ``substore`` exists (Redis drops empty keys).

    Default's key is checked directly; the others are found with SCAN, which is fine
    for the administrative commands that call this and never runs on a CallStore call.
    """
    found: dict[str, None] = {}  # SCAN may return a key twice
    if await client.exists(f"{keys.of_tenant(DEFAULT_TENANT).tag(substore)}{suffix}"):
        found[DEFAULT_TENANT] = None
    async for key in client.scan_iter(match=keys.tenant_pattern(substore, suffix), count=1000):
        found[keys.tenant_of(key, substore)] = None
    return list(found)
