"""The bucket layout: every object key the backend reads or writes is built here.

S3 lists keys in ascending UTF-8 byte order and offers nothing else to sort by, so the
keys themselves carry the contract's list orders:

* Ids become lowercase hex of their UTF-8 bytes. Hex keeps the byte order of the ids,
  never contains ``/`` and turns any id (slashes, control characters, emoji) into a
  safe key segment. A ``/`` after an id ends it and sorts below every hex digit, so an
  id sorts before any longer id it is a prefix of, exactly as Python compares strings.
* Integers (``turnNumber``, ``updatedAt``) are offset by 2**53 and zero-padded to 17
  digits, so their decimal text sorts like the numbers, negatives included.
* Descending orders (agents: ``updatedAt`` desc, ``agentId`` desc) store the complement:
  ``2**53 - updatedAt`` and the hex of every byte subtracted from 255, ended by ``~``,
  which sorts above every hex digit so a longer id comes first.

Index entries end with the ``rev`` of the document they point at (see ``_index.py``).
"""

from __future__ import annotations

import hashlib

from bridge_store.backend.tenants import DEFAULT_TENANT, is_valid_tenant
from bridge_store.errors import invalid_argument

#: S3's limit on the UTF-8 length of a key.
MAX_KEY_BYTES = 1024
_INT_OFFSET = 2**53
_INT_WIDTH = 17
#: Sequence numbers are at most 2**53: 16 digits.
_SEQ_WIDTH = 16
#: Sorts above every hex digit: ends a complemented (descending) id.
DESCENDING_END = "~"
#: Start-after bound that skips every rev of one index position (revs are hex).
PAST_REVS = "~~"

LAYOUT_MARKER = "bridge-store.json"
#: Tenants other than default live under ``<prefix>tenants/<tenant>/``; default keeps
#: the prefix itself, as stores written before tenants did. No other key of a prefix
#: starts with ``tenants/``, so default's listings never reach another tenant's keys.
#: ``<tenant>`` is :func:`tenant_segment`'s: whatever name a caller passes, it is one
#: segment of its own, never a ``/`` that reaches into another tenant's keys.
TENANTS_DIR = "tenants/"
#: Starts the segment of a tenant name that does not follow the tenant rule.
_ENCODED_TENANT = "~"


def tenant_segment(tenant: str) -> str:
    """``tenant`` as its key segment: itself when it follows the tenant rule (every name
    the server takes: lowercase letters, digits, ``-``, ``_``, so no existing key
    changes), else ``~`` and its UTF-8 in hex, which no valid name starts with; so no
    two names share a segment, and none holds a ``/``."""
    if is_valid_tenant(tenant):
        return tenant
    return _ENCODED_TENANT + tenant.encode("utf-8", "surrogatepass").hex()


def tenant_of_segment(segment: str) -> str | None:
    """The tenant whose :func:`tenant_segment` is ``segment``; None for a segment that
    is no tenant's (written by something else)."""
    if is_valid_tenant(segment):
        return segment
    try:
        tenant = bytes.fromhex(segment.removeprefix(_ENCODED_TENANT)).decode(
            "utf-8", "surrogatepass"
        )
    except ValueError:
        return None
    return tenant if segment.startswith(_ENCODED_TENANT) else None


def hex_id(value: str) -> str:
    return value.encode().hex()


def unhex_id(segment: str) -> str:
    return bytes.fromhex(segment).decode()


def descending_hex_id(value: str) -> str:
    return bytes(255 - byte for byte in value.encode()).hex() + DESCENDING_END


def undescending_hex_id(segment: str) -> str:
    complement = bytes.fromhex(segment.removesuffix(DESCENDING_END))
    return bytes(255 - byte for byte in complement).decode()


def ordered_int(value: int) -> str:
    return f"{value + _INT_OFFSET:0{_INT_WIDTH}d}"


def descending_int(value: int) -> str:
    return f"{_INT_OFFSET - value:0{_INT_WIDTH}d}"


def seq_segment(seq: int) -> str:
    return f"{seq:0{_SEQ_WIDTH}d}"


def cwd_segment(cwd: str) -> str:
    # Only equality matters for the cwd index, and a path can be long: a digest keeps
    # the key short. Entries are checked against the document, so even a collision
    # could not return a wrong agent.
    return hashlib.sha256(cwd.encode()).hexdigest()


class Layout:
    """Key builders under one bucket prefix (``""`` or ending in ``/``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def of_tenant(self, tenant: str) -> Layout:
        """The layout of ``tenant``'s keys (this one's must be the store's own prefix)."""
        if tenant == DEFAULT_TENANT:
            return self
        return Layout(f"{self.prefix}{TENANTS_DIR}{tenant_segment(tenant)}/")

    def tenants_dir(self) -> str:
        return self.prefix + TENANTS_DIR

    def _key(self, *parts: str) -> str:
        return checked(self.prefix + "/".join(parts))

    def marker(self) -> str:
        return self.prefix + LAYOUT_MARKER

    # -- agents ------------------------------------------------------------------------

    def agents_docs(self) -> str:
        return self._key("agents", "doc", "")

    def agent_doc(self, agent_id: str) -> str:
        return self._key("agents", "doc", hex_id(agent_id))

    def agents_order(self) -> str:
        return self._key("agents", "order", "")

    def agents_of_cwd(self, cwd: str) -> str:
        return self._key("agents", "cwd", cwd_segment(cwd), "")

    @staticmethod
    def agent_position(updated_at: int, agent_id: str) -> str:
        """The part of an agent index key that sorts: relative to the index prefix."""
        return f"{descending_int(updated_at)}/{descending_hex_id(agent_id)}"

    # -- runs --------------------------------------------------------------------------

    def runs_docs(self) -> str:
        return self._key("runs", "doc", "")

    def run_docs_of_id(self, run_id: str) -> str:
        return self._key("runs", "doc", hex_id(run_id), "")

    def run_doc(self, agent_id: str, run_id: str) -> str:
        return self._key("runs", "doc", hex_id(run_id), hex_id(agent_id))

    def runs_order(self) -> str:
        return self._key("runs", "order", "")

    def runs_of_agent(self, agent_id: str) -> str:
        return self._key("runs", "agent", hex_id(agent_id), "")

    # -- runEvents ---------------------------------------------------------------------

    def all_events(self) -> str:
        return self._key("events", "")

    def run_log(self, run_id: str) -> str:
        """Everything of one run: its events and its idempotency claims."""
        return self._key("events", hex_id(run_id), "")

    def events_of_run(self, run_id: str) -> str:
        return self._key("events", hex_id(run_id), "e", "")

    def event(self, run_id: str, seq: int) -> str:
        return self._key("events", hex_id(run_id), "e", seq_segment(seq))

    def claims_of_run(self, run_id: str) -> str:
        return self._key("events", hex_id(run_id), "k", "")

    def claim(self, run_id: str, idempotency_key: str) -> str:
        return self._key("events", hex_id(run_id), "k", hex_id(idempotency_key))

    # -- checkpoints -------------------------------------------------------------------

    def blobs(self) -> str:
        return self._key("ckpt", "blob", "")

    def blobs_of_agent(self, agent_id: str) -> str:
        return self._key("ckpt", "blob", hex_id(agent_id), "")

    def blob(self, agent_id: str, blob_id: str) -> str:
        return self._key("ckpt", "blob", hex_id(agent_id), hex_id(blob_id))

    def blobs_order(self) -> str:
        return self._key("ckpt", "order", "")

    def blob_order_of_id(self, blob_id: str) -> str:
        return self._key("ckpt", "order", hex_id(blob_id), "")


def checked(key: str) -> str:
    """``key``, if S3 can store it; ``invalid_argument`` when ids made it too long."""
    size = len(key.encode())
    if size > MAX_KEY_BYTES:
        raise invalid_argument(f"ids too long for an S3 key ({size} > {MAX_KEY_BYTES} bytes)")
    return key


def seq_of(event_key: str) -> int:
    return int(event_key.rsplit("/", 1)[1])


def last_segment(key: str) -> str:
    return key.rsplit("/", 1)[1]
