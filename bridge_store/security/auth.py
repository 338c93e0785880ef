"""Who is calling: principals, scopes, tenants, and the registry that resolves tokens.

A bearer token resolves to a :class:`Principal`: the token's name (for logs and
metrics, never the token), the tenant whose items it reads and writes, and its scope.
Tokens are kept only as SHA-256 digests (:mod:`bridge_store.security.tokens_file` reads and
writes them). The one-token shorthand (``BRIDGE_STORE_AUTH_TOKEN`` or
``--auth-token-file``) is a registry of one entry: tenant ``default``, scope ``operator``
(whoever holds the one token runs the server).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backend.tenants import DEFAULT_TENANT, check_tenant
from ..errors import ConfigurationError

logger = logging.getLogger(__name__)

#: Token names appear in logs and metric labels; the same conservative alphabet plus
#: ``.`` and ``@`` (``alice@laptop``, ``ci.nightly``).
TOKEN_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
#: The name the one-token shorthand's principal carries in logs.
SHORTHAND_TOKEN_NAME = "auth-token"  # noqa: S105 - a name, not a secret
#: A changed tokens file is noticed at the first call after this many seconds, so a
#: revoked token is refused within this bound (plus the time of one call).
RELOAD_CHECK_SECONDS = 1.0


class Scope(enum.Enum):
    """What a token may do; each scope includes the ones before it."""

    READ = "read"  # get and list only
    WRITE = "write"  # everything the bridge does
    ADMIN = "admin"  # also the administrative commands (prune, export)
    #: Also what spans every tenant: all of /metrics. A tenant's admin sees its own
    #: tenant's series only (a named token never learns that other tenants exist).
    OPERATOR = "operator"

    def allows(self, needed: Scope) -> bool:
        # By value: a str's hash is cached, an Enum member's is a Python-level call.
        return _RANK[self._value_] >= _RANK[needed._value_]


_RANK = {Scope.READ.value: 0, Scope.WRITE.value: 1, Scope.ADMIN.value: 2, Scope.OPERATOR.value: 3}


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a token stands for."""

    name: str
    tenant: str
    scope: Scope


def local_principal(tenant: str = DEFAULT_TENANT) -> Principal:
    """Who a command acts as when it opens the stores itself (``keys rotate``, reading
    history from a store URL): whoever holds the backends' credentials can do anything
    anyway, so an admin of ``tenant``."""
    return Principal(name="local", tenant=check_tenant(tenant), scope=Scope.ADMIN)


@dataclass(frozen=True, slots=True)
class TokenEntry:
    """A token as the server knows it: its digest, never the token itself."""

    name: str
    sha256: bytes
    tenant: str
    scope: Scope

    @property
    def principal(self) -> Principal:
        return Principal(name=self.name, tenant=self.tenant, scope=self.scope)


def token_digest(token: str | bytes) -> bytes:
    raw = token.encode("utf-8") if isinstance(token, str) else token
    return hashlib.sha256(raw).digest()


#: What a registry looks a presented token up in: each entry's principal by its digest
#: (made once, not per call).
_Table = dict[bytes, Principal]


def _table(entries: Sequence[TokenEntry]) -> _Table:
    # An entry listed twice: the later one wins, as it did when every entry was compared.
    return {entry.sha256: entry.principal for entry in entries}


def _match(table: _Table, presented: bytes) -> Principal | None:
    """The principal of the entry whose digest is ``presented``'s: one lookup, whatever
    the number of tokens.

    It was a ``compare_digest`` with every entry, which cost 11.5 us a call with 300
    tokens and 787 us with 20,000. Timing can tell an attacker no more now: what is
    compared is the SHA-256 of what they sent, never a token, so a lookup's time
    depends at most on how that digest's bytes and hash relate to a stored digest, and
    choosing a token whose digest comes near a stored one takes a preimage of SHA-256.
    """
    return table.get(token_digest(presented))


class TokenRegistry:
    """The tokens a server accepts, re-read from their file when it changes.

    ``loader`` parses the file (``tokens_file.load_entries``); a registry without a
    path (the one-token shorthand) never reloads. A reload that fails keeps the
    previous entries and logs why; the log never holds a token or a digest.

    On a server, reloads run in one task of the event loop that parses the file on a
    worker thread and then swaps the entries in one assignment: the loop keeps
    answering while 20,000 tokens are parsed, and a request that comes while a reload
    runs (SIGHUP, a changed file) makes one more reload after it, however many came.
    Nothing here takes a lock that a signal could interrupt and take again.
    """

    def __init__(
        self,
        entries: Sequence[TokenEntry],
        *,
        path: Path | None = None,
        loader: Callable[[Path], list[TokenEntry]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if path is not None and loader is None:
            raise ValueError("a registry with a path needs a loader")
        self._entries: tuple[TokenEntry, ...] = tuple(entries)
        self._table = _table(self._entries)
        self._path = path
        self._loader = loader
        self._clock = clock
        self._stamp = _stamp(path) if path is not None else None
        self._checked_at = clock()
        # Set by request_reload (from a signal handler too: a plain assignment);
        # cleared by the reload task as it starts a read.
        self._wanted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        # Orders swaps when reloads run on several threads (reload() called directly):
        # held for a few assignments only, never while reading or parsing.
        self._swap_lock = threading.Lock()
        self._read_number = 0
        self._swapped_number = 0

    @classmethod
    def single(cls, token: str) -> TokenRegistry:
        """The one-token shorthand: tenant ``default``, scope ``operator``."""
        entry = TokenEntry(
            name=SHORTHAND_TOKEN_NAME,
            sha256=token_digest(token),
            tenant=DEFAULT_TENANT,
            scope=Scope.OPERATOR,
        )
        return cls([entry])

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def entries(self) -> tuple[TokenEntry, ...]:
        return self._entries

    def resolve(self, token: bytes) -> Principal | None:
        """The principal ``token`` stands for, or None; notices a changed file first."""
        if self._path is not None:
            self._reload_if_changed()
        return _match(self._table, token)

    def reload(self) -> bool:
        """Re-read the file now, on this thread; True if the new entries were taken.

        For callers without an event loop (tests, tools); a server calls
        :meth:`request_reload` instead, which never blocks its loop.
        """
        if self._path is None or self._loader is None:
            return False
        with self._swap_lock:
            self._read_number += 1
            number = self._read_number
        stamp, entries = self._read()
        return self._swap(number, stamp, entries)

    def follow_on(self, loop: asyncio.AbstractEventLoop, reload_signal: int | None) -> None:
        """Reload in a task of ``loop`` from now on, and on ``reload_signal`` (SIGHUP).

        The signal's handler runs as a callback of the loop and only asks for a
        reload. A request made before (see :meth:`request_reload`) is served now.
        """
        if self._path is None:
            return
        self._loop = loop
        if reload_signal is not None:
            loop.add_signal_handler(reload_signal, self.request_reload)
        if self._wanted:
            self._start_task()

    def request_reload(self) -> None:
        """Ask for a reload soon; safe from a signal handler and from any thread.

        Without a loop to follow yet, the request waits for :meth:`follow_on`.
        """
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
        """On the loop's thread: the one reload task, unless it is already running."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._reload_while_wanted(), name="tokens-file-reload"
            )

    async def _reload_while_wanted(self) -> None:
        while self._wanted:
            self._wanted = False
            with self._swap_lock:
                self._read_number += 1
                number = self._read_number
            stamp, entries = await asyncio.to_thread(self._read)
            self._swap(number, stamp, entries)

    def _read(self) -> tuple[tuple[int, int, int] | None, list[TokenEntry] | ConfigurationError]:
        """The file's stamp and its entries, or why they cannot be taken (any thread)."""
        assert self._path is not None
        assert self._loader is not None
        stamp = _stamp(self._path)
        try:
            return stamp, self._loader(self._path)
        except ConfigurationError as error:
            return stamp, error

    def _swap(
        self,
        number: int,
        stamp: tuple[int, int, int] | None,
        entries: list[TokenEntry] | ConfigurationError,
    ) -> bool:
        with self._swap_lock:
            if number < self._swapped_number:
                return False  # a read that started later has already been taken
            self._swapped_number = number
            self._stamp = stamp  # a failure is not retried (and logged) until it changes
            if not isinstance(entries, ConfigurationError):
                self._entries = tuple(entries)
                self._table = _table(self._entries)
        if isinstance(entries, ConfigurationError) and stamp is None:
            # Deleting is no revocation (docs/security.md): a file that is briefly
            # missing while a deploy rewrites it must not lock every client out.
            logger.warning(
                "tokens file %s is gone: the %d tokens last read stay valid until it is "
                "back; to refuse them all, write an empty tokens file",
                self._path,
                len(self._entries),
            )
            return False
        if isinstance(entries, ConfigurationError):
            logger.error("tokens file not reloaded, the previous tokens stay: %s", entries)
            return False
        logger.info("tokens file %s reloaded: %d tokens", self._path, len(entries))
        return True

    def _reload_if_changed(self) -> None:
        if self._path is None:
            return
        now = self._clock()
        if now - self._checked_at < RELOAD_CHECK_SECONDS:
            return
        self._checked_at = now
        if _stamp(self._path) == self._stamp:
            return
        if self._loop is None:
            self.reload()  # no loop to keep answering: read it now
        else:
            self.request_reload()


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is rewritten: modification time, size and inode."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)
