"""What seals and ends viewer sessions, made once per server and shared by its workers.

``serve --workers N`` forks N processes that each serve the viewer; a browser's
requests land on any of them. So the parent makes the :class:`SessionKeys` before it
forks, and every worker inherits the same ones:

- the sealing secret, 32 random bytes in memory. A fork copies it; it is never
  written to a file, an environment variable or a log;
- the ended sessions, an :class:`EndedSessions` table in an anonymous shared memory
  mapping (``mmap``) under a process-shared lock: a sign-out on one worker is seen by
  all of them at their next request, and nothing of it is on disk or outlives the
  processes, however they end.

The table also holds the key's *generation*: the cookie key is derived from the
secret and the generation (HKDF), and past :data:`MAX_ENDED_SESSIONS` ended sessions
that have not expired the generation moves on, which signs everyone out on every
worker at once rather than forget an ended session.

Layout of the mapping: a header (generation, count), then ``capacity`` session ids of
16 bytes, then their expiry times (float seconds). Ids are appended; a lookup is one
C-speed search through the ids in use (at the bound, 1.6 MB); when the table is full
the expired ones are dropped.
"""

from __future__ import annotations

import logging
import mmap
import secrets
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

#: Ended sessions remembered at once (24 bytes each, shared); past it, every session ends.
MAX_ENDED_SESSIONS = 100_000
#: A session id's length in the table (``secrets.token_hex(16)`` as bytes).
ID_BYTES = 16
#: Longest a worker waits for another to leave the table: its holds take microseconds
#: (a full table's clean-up, milliseconds), so only a worker that died holding it makes
#: anyone wait this long, and the server is stopping then.
LOCK_SECONDS = 2.0

_HEADER = struct.Struct("=QQ")  # generation, count
_EXPIRY = struct.Struct("=d")


class _Lock(Protocol):
    def acquire(self, block: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...


class TableLocked(Exception):
    """Another process held the ended-session table past :data:`LOCK_SECONDS`."""


class EndedSessions:
    """Session ids signed out before their cookies expire, and the key's generation."""

    def __init__(self, capacity: int, lock: _Lock) -> None:
        if capacity < 1:
            raise ValueError("an ended-session table needs room for one session")
        self.capacity = capacity
        self._lock = lock
        self._ids_end = _HEADER.size + capacity * ID_BYTES
        # MAP_SHARED and anonymous: forked children share the pages, nothing is on disk.
        self._memory = mmap.mmap(-1, self._ids_end + capacity * _EXPIRY.size)

    @classmethod
    def in_process(cls, capacity: int = MAX_ENDED_SESSIONS) -> EndedSessions:
        """For a server of one process."""
        return cls(capacity, threading.Lock())

    @classmethod
    def across_forks(cls, capacity: int = MAX_ENDED_SESSIONS) -> EndedSessions:
        """For processes forked after this call: they share the table and its lock."""
        import multiprocessing

        return cls(capacity, multiprocessing.get_context("fork").Lock())

    def generation(self) -> int:
        """The key's generation now. Written only under the lock; an aligned 8-byte word
        is read whole, so this needs no lock."""
        return int(_HEADER.unpack_from(self._memory)[0])

    def is_ended(self, session_id: bytes, generation: int) -> bool:
        """Whether the session was signed out, or its key's generation has passed.
        Raises :class:`TableLocked` when the table cannot be read in time."""
        with self._locked():
            current, count = _HEADER.unpack_from(self._memory)
            return current != generation or self._find(session_id, count)

    def end(self, session_id: bytes, expires: float) -> bool:
        """Record the session as ended until ``expires`` (``time.time()`` seconds).
        False when the table was full of live ones, so the generation moved on instead
        (every session ended). Raises :class:`TableLocked` as ``is_ended`` does."""
        if len(session_id) != ID_BYTES:
            raise ValueError(f"a session id is {ID_BYTES} bytes")
        with self._locked():
            generation, count = _HEADER.unpack_from(self._memory)
            if self._find(session_id, count):
                return True  # two sign-outs of one session at once
            if count >= self.capacity:
                count = self._drop_expired(count, time.time())
            if count >= self.capacity:
                _HEADER.pack_into(self._memory, 0, generation + 1, 0)
                return False
            self._memory[self._id_at(count) : self._id_at(count + 1)] = session_id
            _EXPIRY.pack_into(self._memory, self._expiry_at(count), expires)
            _HEADER.pack_into(self._memory, 0, generation, count + 1)
            return True

    def __len__(self) -> int:
        return int(_HEADER.unpack_from(self._memory)[1])

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if not self._lock.acquire(True, LOCK_SECONDS):
            raise TableLocked(f"the ended viewer sessions stayed locked for {LOCK_SECONDS:g} s")
        try:
            yield
        finally:
            self._lock.release()

    def _find(self, session_id: bytes, count: int) -> bool:
        start, end = _HEADER.size, self._id_at(count)
        while (found := self._memory.find(session_id, start, end)) != -1:
            if (found - _HEADER.size) % ID_BYTES == 0:
                return True
            start = found + 1  # a match across two ids: not this one
        return False

    def _drop_expired(self, count: int, now: float) -> int:
        """Keep only the ids whose cookies have not expired; how many are left."""
        kept = 0
        for index in range(count):
            (expires,) = _EXPIRY.unpack_from(self._memory, self._expiry_at(index))
            if expires > now:
                if kept != index:
                    self._memory[self._id_at(kept) : self._id_at(kept + 1)] = self._memory[
                        self._id_at(index) : self._id_at(index + 1)
                    ]
                    _EXPIRY.pack_into(self._memory, self._expiry_at(kept), expires)
                kept += 1
        return kept

    def _id_at(self, index: int) -> int:
        return _HEADER.size + index * ID_BYTES

    def _expiry_at(self, index: int) -> int:
        return self._ids_end + index * _EXPIRY.size


@dataclass(frozen=True)
class SessionKeys:
    """The sealing secret and the ended sessions of one server, for every worker."""

    secret: bytes
    ended: EndedSessions

    @classmethod
    def new(cls, *, across_forks: bool = False, capacity: int = MAX_ENDED_SESSIONS) -> SessionKeys:
        """New keys; ``across_forks`` for a parent about to fork the workers that use them."""
        table = EndedSessions.across_forks if across_forks else EndedSessions.in_process
        return cls(secrets.token_bytes(32), table(capacity))

    def __repr__(self) -> str:
        return f"SessionKeys(ended={len(self.ended)} of {self.ended.capacity})"  # no secret
