"""The key layout and the byte encodings that make sorted-set members sort like rows.

Every key starts with ``{<prefix>:<substore>}``: the braces are a Redis Cluster hash
tag, so all keys of one substore under one prefix live in one slot and every Lua
script (which only ever touches one substore) runs on one node. The four substores of
a prefix hash to four slots, so a cluster can spread them over four shards.

Tenants: tenant ``default`` keeps exactly the layout of stores written before tenants
existed (``{<prefix>:<substore>}``), so they need no migration; any other tenant's tag
is ``{<prefix>:<substore>@<tenant>}``. Prefixes cannot hold ``@``, so no tenant's keys
can be mistaken for another prefix's, and each tenant's substore is still one slot.

Whatever tenant name a caller passes, it cannot reach another tenant's keys: a name
enters keys as :func:`tenant_part` writes it, itself when it follows the tenant rule
(:data:`~bridge_store.backend.tenants.TENANT_PATTERN`: lowercase letters, digits, ``-``
and ``_``, none of which means anything in a hash tag, a key or a SCAN pattern), and
``~`` and its UTF-8 in hex otherwise. A valid name never starts with ``~``, so the two
forms cannot meet, and no name can hold a ``}`` that ends its tag early (issue 21:
tenant ``team-a}:blob:Q`` wrote a key team-a read as one of its blobs). Every name the
server ever took follows the rule (tokens files, ``--tenant`` and imports check it),
so no key of an existing store changes.

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
they are (no migration); ``#`` cannot occur in prefixes or tenant parts, so these tags
never collide with a substore tag or another prefix's keys. An id holding ``}`` would
end its tag early, so such a run's or agent's tag is ``{<prefix>:<substore>!<tenant>!
<hex of the id>}`` instead: hex holds no ``}``, and ``!`` (in no prefix, tenant part or
tag of the other form) keeps the two forms apart. Ids without ``}`` (every id the
bridge makes) keep the first form.

UTF-8 (even with ``surrogatepass``) never contains the byte ``0xFF``, so
``prefix + b"\\xff"`` bounds from above every member that starts with ``prefix``.
UTF-8 byte order equals code point order, which is how Python orders ``str``, so the
order matches the reference backend's.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge_store.backend.substores import SUBSTORE_NAMES
from bridge_store.backend.tenants import DEFAULT_TENANT, is_valid_tenant

INT_WIDTH = 16
_INT_OFFSET = 2**63
_ESCAPED_NUL = b"\x00\x01"
_END = b"\x00\x00"
#: Sorts above every encoded member (see the module docstring).
TOP = b"\xff"
#: Starts the part of a tenant name that does not follow the tenant rule.
_ENCODED_TENANT = "~"


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


def tenant_part(tenant: str) -> str:
    """``tenant`` as keys hold it (see the module docstring)."""
    if is_valid_tenant(tenant):
        return tenant
    return _ENCODED_TENANT + utf8(tenant).hex()


def tenant_of_part(part: str) -> str:
    """The tenant whose :func:`tenant_part` is ``part`` (a part no tenant's, which only
    something else can have written, as it is)."""
    if part.startswith(_ENCODED_TENANT):
        try:
            return from_utf8(bytes.fromhex(part.removeprefix(_ENCODED_TENANT)))
        except ValueError:
            return part
    return part


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

    @property
    def _tenant(self) -> str:
        return tenant_part(self.tenant)

    def tag(self, substore: str) -> str:
        if self.tenant == DEFAULT_TENANT:
            return f"{{{self.prefix}:{substore}}}"
        return f"{{{self.prefix}:{substore}@{self._tenant}}}"

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
                f"{{{self.prefix}:{substore}!*",
            )
        ]

    def tenant_pattern(self, substore: str, suffix: str) -> str:
        """A SCAN pattern for key ``suffix`` of ``substore`` of every tenant but default."""
        return f"{{{self.prefix}:{substore}@*}}{suffix}"

    def tenant_of(self, key: bytes, substore: str) -> str:
        """The tenant a key matched by :meth:`tenant_pattern` belongs to."""
        start = len(f"{{{self.prefix}:{substore}@")
        return tenant_of_part(from_utf8(key[start : key.index(b"}", start)]))

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
            owner = terminated(agent_id)
            return self._owned_tag("checkpoints", owner) + b":blob:" + field
        return utf8(f"{self.tag('checkpoints')}:blob:") + field

    def blob_index(self, name: str) -> str:
        return f"{self.tag('checkpoints')}:by-{name}"

    def _owned(self, substore: str, owner: str) -> bytes:
        """The tag of ``owner``'s keys in the spread layout."""
        return self._owned_tag(substore, utf8(owner))

    def _owned_tag(self, substore: str, owner: bytes) -> bytes:
        if b"}" in owner:  # it would end the tag early: see the module docstring
            return utf8(f"{{{self.prefix}:{substore}!{self._tenant}!{owner.hex()}}}")
        return utf8(f"{{{self.prefix}:{substore}#{self._tenant}#") + owner + b"}"

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
        :meth:`event_logs_patterns`, as one registry key would be every append's hot spot)."""
        return f"{self.tag('runEvents')}:runs"

    def event_logs_patterns(self) -> list[str]:
        """SCAN patterns for every key of this tenant's run logs (spread layout)."""
        tenant = self._tenant
        return [f"{{{self.prefix}:runEvents#{tenant}#*", f"{{{self.prefix}:runEvents!{tenant}!*"]

    def run_of_log(self, key: bytes) -> str | None:
        """The run id of a key :meth:`event_logs_patterns` matched, if it is a log (not
        an idempotency hash)."""
        if not key.endswith(b"}:log"):
            return None
        tag = key[: -len(b":log")]
        escaped = utf8(f"{{{self.prefix}:runEvents!{self._tenant}!")
        if tag.startswith(escaped):
            return from_utf8(bytes.fromhex(from_utf8(tag[len(escaped) : -1])))
        return from_utf8(tag[len(utf8(f"{{{self.prefix}:runEvents#{self._tenant}#")) : -1])


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
