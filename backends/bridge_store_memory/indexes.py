"""Sorted indexes the in-memory substores list from."""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from bridge_store.backend.substores import BlobRef

K = TypeVar("K", bound=tuple[object, ...] | BlobRef)
G = TypeVar("G", bound=Hashable)


class Index(Generic[K]):
    """Sort keys in ascending order, one per row."""

    def __init__(self) -> None:
        self._keys: list[K] = []

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: K) -> None:
        bisect.insort(self._keys, key)

    def remove(self, key: K) -> None:
        at = bisect.bisect_left(self._keys, key)
        if at < len(self._keys) and self._keys[at] == key:
            del self._keys[at]

    def after(self, key: K | None, limit: int) -> list[K]:
        """Up to ``limit`` keys strictly after ``key``, ascending."""
        start = 0 if key is None else bisect.bisect_right(self._keys, key)
        return self._keys[start : start + limit]

    def before(self, key: K | None, limit: int) -> list[K]:
        """Up to ``limit`` keys strictly before ``key``, descending."""
        stop = len(self._keys) if key is None else bisect.bisect_left(self._keys, key)
        return self._keys[max(0, stop - limit) : stop][::-1]


class Grouped(Generic[G, K]):
    """One index per group (a cwd, an agent id ...), dropped when it empties."""

    def __init__(self) -> None:
        self._groups: dict[G, Index[K]] = {}

    def add(self, group: G, key: K) -> None:
        self._groups.setdefault(group, Index()).add(key)

    def remove(self, group: G, key: K) -> None:
        index = self._groups.get(group)
        if index is not None:
            index.remove(key)
            if not len(index):
                del self._groups[group]

    def get(self, group: G) -> Index[K]:
        return self._groups.get(group) or Index()

    def after(self, groups: Iterable[G], key: K | None, limit: int) -> list[K]:
        """The first ``limit`` keys after ``key`` of several groups, ascending."""
        pages = [self.get(group).after(key, limit) for group in dict.fromkeys(groups)]
        merged: Iterator[K] = heapq.merge(*pages)
        return list(itertools.islice(merged, limit))
