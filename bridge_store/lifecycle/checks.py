"""Every item written into a store passes the checks a CallStore call carrying it would.

Items come from places no client check has seen: an archive (whose SHA-256 says only
that it was not damaged, not who wrote it), a bridge's own store, another store
(which may hold documents written before these checks existed). So before a
:class:`~.sink.StoreSink` writes one, and before an import's first pass accepts one,
it goes through the contract: the tenant name rule
(:func:`~bridge_store.security.auth.check_tenant`), ``validate_agent`` and
``validate_run``, :func:`~bridge_store.backend.stored_documents.validate_stored_event`, the
id rules for blob ids, the JSON codec's rules on values, and the server's request
limit for blob sizes. An item that fails is refused with one line naming it: the
command stops there, and what it wrote before is complete items a rerun skips.
"""

from __future__ import annotations

from typing import Any

from bridge_store.backend.stored_documents import check_json_value, validate_stored_event
from bridge_store.backend.tenants import check_tenant
from bridge_store.errors import ConfigurationError, ConnectError, invalid_argument
from bridge_store.rpc.contract import validate_agent, validate_run
from bridge_store.security.auth import TOKEN_NAME_PATTERN
from bridge_store.security.encryption import is_sealed_metadata
from bridge_store.security.sealed_stores import METADATA
from bridge_store.wire.fields import require_id

from ..wire.http_limits import DEFAULT_MAX_REQUEST_BYTES
from .items import AgentItem, BlobItem, EventsItem, Item, RunItem

#: The largest blob taken by default: the largest request serve takes by default
#: (``--max-request-bytes``), so nothing is restored that no bridge could have sent.
DEFAULT_MAX_BLOB_BYTES = DEFAULT_MAX_REQUEST_BYTES
#: Characters of an id or a name shown in a message: a hostile one can be long.
_SHOWN = 80


class InvalidItem(ConfigurationError):
    """An item a CallStore call would have been refused; the message names it and why."""


def shown(value: Any) -> str:
    """``value`` for a one-line message: quoted, escaped, and cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."


def describe(item: Item) -> str:
    """Which item ``item`` is, in words, whatever its fields hold."""
    of_tenant = f"of tenant {shown(item.tenant)}"
    if isinstance(item, BlobItem):
        return f"checkpoint blob {shown(item.blob_id)} of agent {shown(item.agent_id)} {of_tenant}"
    if isinstance(item, EventsItem):
        return f"the events of run {shown(item.run_id)} {of_tenant}"
    document = item.document if isinstance(item.document, dict) else {}
    if isinstance(item, RunItem):
        return f"run {shown(document.get('runId'))} {of_tenant}"
    return f"agent {shown(document.get('agentId'))} {of_tenant}"


def checked(item: Item) -> Item:
    """``item`` as a CallStore call would store it (integral doubles made integers), or
    :class:`InvalidItem`."""
    try:
        if not isinstance(item.tenant, str):
            raise ValueError("a tenant must be a string")
        check_tenant(item.tenant)
    except ValueError as error:
        raise InvalidItem(f"refused {describe(item)}: {error}") from None
    try:
        return _checked(item)
    except ConnectError as error:
        raise InvalidItem(f"refused {describe(item)}: {error.message}") from None


def _checked(item: Item) -> Item:
    if isinstance(item, AgentItem):
        document = item.document
        # A sealed store read without its key file hands over sdkMetadata sealed (one
        # string, which travels as it is): the checks apply to the rest.
        sealed = isinstance(document, dict) and is_sealed_metadata(document.get(METADATA))
        agent = validate_agent({**document, METADATA: None} if sealed else document, "agent")
        check_json_value(agent, "agent", depth=1)
        if sealed:
            agent[METADATA] = document[METADATA]
        return AgentItem(item.tenant, agent, _creator(item.creator))
    if isinstance(item, RunItem):
        run = validate_run(item.document, "run")
        check_json_value(run, "run", depth=1)
        return RunItem(item.tenant, run, _creator(item.creator))
    if isinstance(item, EventsItem):
        require_id({"runId": item.run_id}, "runId", "event")
        events = []
        for event in item.events:
            stored = validate_stored_event(event, "event")
            if stored["runId"] != item.run_id:
                raise invalid_argument(f"event {stored['seq']} is of another run")
            check_json_value(stored, "event")
            events.append(stored)
        return EventsItem(item.tenant, item.run_id, events)
    require_id({"agentId": item.agent_id}, "agentId", "checkpoint")
    require_id({"blobId": item.blob_id}, "blobId", "checkpoint")
    return item


def _creator(name: object) -> str | None:
    """A recorded creator is a token name, as the server recorded it; a store written
    around the server may hold anything, which the viewer would then show."""
    if name is None or (isinstance(name, str) and TOKEN_NAME_PATTERN.fullmatch(name)):
        return name
    raise invalid_argument(f"its creator {shown(name)} is not a token name")


def check_blob_size(item: BlobItem, size: int, limit: int) -> None:
    """:class:`InvalidItem` if a blob of ``size`` bytes is over ``limit``."""
    if size > limit:
        raise InvalidItem(
            f"refused {describe(item)}: {size} bytes, over the {limit}-byte request limit "
            "(--max-request-bytes: no bridge could have stored it through a server with it)"
        )
