"""The key layout and the byte encodings that make sorted-set members sort like rows.

Every key starts with ``{<prefix>:<substore>}``: the braces are a Redis Cluster hash
tag, so all keys of one substore under one prefix live in one slot and every Lua
script (which only ever touches one substore) runs on one node. The four substores of
a prefix hash to four slots, so a cluster can spread them over four shards.

Tenants: tenant ``default`` keeps exactly the layout of stores written before tenants
existed (``{<prefix>:<substore>}``), so they need no migration; any other tenant's tag
is ``{<prefix>:<substore>@<tenant>}``. Prefixes cannot hold ``@``, so no tenant's keys
can be mistaken for another prefix's, and each tenant's substore is still one slot.

Index members are compared by Redis as raw bytes (``ZRANGE ... BYLEX``), so each sort
key is encoded so that byte order equals the contract's order:

- integers become 16 hex digits of ``n + 2**63`` (fixed width, so they compare like
  numbers and need no separator);
- a string that is followed by more key parts becomes its UTF-8 bytes with NUL escaped
  as ``\\x00\\x01`` and ``\\x00\\x00`` appended: this keeps byte order (``\\x00\\x00`` sorts
  below anything that could follow) and makes the encoding prefix-free, so "a" and
  "ab" cannot collide;
- the last part of a key stays raw UTF-8 (it needs no end marker).

Redis Cluster (``redis+cluster://``, ``KeySpace.spread``): one slot per substore would
put every event log of a deployment on one shard, so there the heavy keys get tags of
their own: each run's log and idempotency hash ``{<prefix>:runEvents#<tenant>#<runId>}``,
each agent's blob bytes ``{<prefix>:checkpoints#<tenant>#<terminated(agentId)>}``, for every tenant
including default. The rows of agents and runs and the checkpoint indexes keep their
substore tag: their global orderings need one ordered index per substore. This layout
is cluster-only because plain Redis stores written before it keep their keys where
they are (no migration); ``#`` cannot occur in prefixes or tenants, so these tags
never collide with a substore tag or another prefix's keys. A run or agent id holding
``}`` ends its tag early: runs sharing the text before it share a slot, and each run's
keys still share one.

UTF-8 (even with ``surrogatepass``) never contains the byte ``0xFF``, so
``prefix + b"\\xff"`` bounds from above every member that starts with ``prefix``.
UTF-8 byte order equals code point order, which is how Python orders ``str``, so the
order matches the reference backend's.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge_store.security.auth import DEFAULT_TENANT
from bridge_store.substores import SUBSTORE_NAMES

INT_WIDTH = 16
_INT_OFFSET = 2**63
_ESCAPED_NUL = b"\x00\x01"
_END = b"\x00\x00"
#: Sorts above every encoded member (see the module docstring).
TOP = b"\xff"


def utf8(text: str) -> bytes:
    # surrogatepass: JSON may carry lone surrogates ("\ud800"), which are valid str.
    return text.encode("utf-8", "surrogatepass")


def from_utf8(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def sortable_int(number: int) -> bytes:
    return b"%016x" % (number + _INT_OFFSET)


def terminated(text: str) -> bytes:
    """``text`` as an order-preserving, prefix-free key part."""
    return utf8(text).replace(b"\x00", _ESCAPED_NUL) + _END


def split_terminated(data: bytes) -> tuple[str, bytes]:
    """The string a :func:`terminated` part at the start of ``data`` holds, and the rest."""
    index = 0
    while True:
        index = data.index(b"\x00", index)
        if data[index + 1] == 0:
            return from_utf8(data[:index].replace(_ESCAPED_NUL, b"\x00")), data[index + 2 :]
        index += 2


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The names of every key one prefix uses for one tenant."""

    prefix: str
    tenant: str = DEFAULT_TENANT
    #: The cluster layout: run logs and agents' blobs in slots of their own.
    spread: bool = False

    def of_tenant(self, tenant: str) -> KeySpace:
        return KeySpace(self.prefix, tenant, self.spread)

    def tag(self, substore: str) -> str:
        if self.tenant == DEFAULT_TENANT:
            return f"{{{self.prefix}:{substore}}}"
        return f"{{{self.prefix}:{substore}@{self.tenant}}}"

    def patterns(self) -> list[str]:
        """SCAN patterns matching every key of this prefix, of every tenant, and nothing
        else.

        Exact because prefixes hold neither braces, ``@`` nor glob characters: the keys
        of prefix ``a:b`` (``{a:b:agents}...``) do not match prefix ``a``'s patterns.
        """
        return [
            pattern
            for substore in SUBSTORE_NAMES
            for pattern in (
                f"{{{self.prefix}:{substore}}}*",
                self.tenant_pattern(substore, "*"),
                f"{{{self.prefix}:{substore}#*",
            )
        ]

    def tenant_pattern(self, substore: str, suffix: str) -> str:
        """A SCAN pattern for key ``suffix`` of ``substore`` of every tenant but default."""
        return f"{{{self.prefix}:{substore}@*}}{suffix}"

    def tenant_of(self, key: bytes, substore: str) -> str:
        """The tenant a key matched by :meth:`tenant_pattern` belongs to."""
        start = len(f"{{{self.prefix}:{substore}@")
        return from_utf8(key[start : key.index(b"}", start)])

    # Row tables (agents, runs): a hash of documents, a hash of each row's
    # index members (so updates and deletes can find the old ones), one zset per index.

    def table(self, substore: str, indexes: tuple[str, ...]) -> TableKeys:
        tag = self.tag(substore)
        return TableKeys(
            docs=f"{tag}:docs",
            members=f"{tag}:members",
            indexes=tuple(f"{tag}:by-{name}" for name in indexes),
            creators=f"{tag}:creators",
        )

    # Checkpoints: a string key per blob, and the table's two indexes.

    def blob(self, agent_id: str, field: bytes) -> bytes:
        if self.spread:
            # terminated(): agent ids may hold anything, and the key must name one blob.
            head = utf8(f"{{{self.prefix}:checkpoints#{self.tenant}#")
            return head + terminated(agent_id) + b"}:blob:" + field
        return utf8(f"{self.tag('checkpoints')}:blob:") + field

    def blob_index(self, name: str) -> str:
        return f"{self.tag('checkpoints')}:by-{name}"

    def _owned(self, substore: str, owner: str) -> bytes:
        """The tag of ``owner``'s keys in the spread layout."""
        return utf8(f"{{{self.prefix}:{substore}#{self.tenant}#{owner}}}")

    # Run event logs: one sorted set and one idempotency-key hash per run, and (plain
    # layout) a registry of the runs that have a log (so "delete every event" needs no
    # SCAN).

    def event_log(self, run_id: str) -> bytes:
        if self.spread:
            return self._owned("runEvents", run_id) + b":log"
        return utf8(f"{self.tag('runEvents')}:log:") + utf8(run_id)

    def event_keys(self, run_id: str) -> bytes:
        if self.spread:
            return self._owned("runEvents", run_id) + b":keys"
        return utf8(f"{self.tag('runEvents')}:keys:") + utf8(run_id)

    def event_runs(self) -> str:
        """The registry (plain layout only: in the spread layout the logs are found by
        :meth:`event_logs_pattern`, as one registry key would be every append's hot spot)."""
        return f"{self.tag('runEvents')}:runs"

    def event_logs_pattern(self) -> str:
        """A SCAN pattern for every key of this tenant's run logs (spread layout)."""
        return f"{{{self.prefix}:runEvents#{self.tenant}#*"


@dataclass(frozen=True, slots=True)
class TableKeys:
    docs: str
    members: str
    indexes: tuple[str, ...]
    #: Who created each row (a hash by row field), beside the documents, never in them.
    creators: str

    def all(self) -> list[str]:
        """The keys a row script takes, in the order the scripts expect (creators last)."""
        return [self.docs, self.members, *self.indexes, self.creators]
