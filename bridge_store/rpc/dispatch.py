"""Routes one CallStore call to its substore method, through the contract checks.

``call_store`` is the whole server-side meaning of the RPC: the wire layer decodes a
request into (substore, method, input) and encodes the output this returns, gzipped
only when the answer says it is worth it (:data:`~.types.Answer`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..backend.substores import agent_position, run_position
from ..errors import Code, ConnectError
from ..security import audit
from ..security.auth import Principal, Scope
from ..stack.stores import Stores
from ..types import Answer, Document
from ..wire import fields
from ..wire.large_answers import LARGE_ANSWER_BYTES, BlobAnswer
from . import contract as c

#: A method's implementation: the stores, the caller and the call's input. The caller,
#: not only its tenant: creates record who made them (its name), at no extra cost.
Handler = Callable[[Stores, Principal, Document], Awaitable[Document | None]]

_IN = "input"


# -- agents ---------------------------------------------------------------------------


async def _agents_get(stores: Stores, caller: Principal, data: Document) -> Document | None:
    return await stores.agents.get(caller.tenant, fields.require_id(data, "agentId", _IN))


async def _agents_create(stores: Stores, caller: Principal, data: Document) -> Document | None:
    agent = c.validate_agent(data.get("agent"), f"{_IN}.agent")
    return await stores.agents.create(caller.tenant, agent, caller.name)


async def _agents_update(stores: Stores, caller: Principal, data: Document) -> Document | None:
    return await stores.agents.update(
        caller.tenant, c.validate_agent(data.get("agent"), f"{_IN}.agent")
    )


async def _agents_delete(stores: Stores, caller: Principal, data: Document) -> Document | None:
    filter_ = fields.require_object(data.get("filter"), f"{_IN}.filter")
    field = f"{_IN}.filter"
    await stores.agents.delete(
        caller.tenant,
        fields.optional_id_list(filter_, "agentIds", field),
        fields.optional_string(filter_, "cwd", field, fields.MAX_CWD_BYTES),
    )
    return None


async def _agents_list(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.optional_object(data, "filter", _IN)
    limit = fields.optional_limit(filter_, field, fields.DEFAULT_AGENT_LIMIT)
    rows = await stores.agents.list(
        caller.tenant,
        cwd=fields.optional_string(filter_, "cwd", field, fields.MAX_CWD_BYTES),
        after=c.parse_agent_cursor(filter_, field),
        limit=limit + 1,
    )
    items, more = c.page(rows, limit)
    result: Document = {"items": items}
    if more and (cursor := c.agent_cursor(agent_position(items[-1]))) is not None:
        result["nextCursor"] = cursor
    return result


# -- runs -----------------------------------------------------------------------------


async def _runs_get(stores: Stores, caller: Principal, data: Document) -> Document | None:
    return await stores.runs.get(
        caller.tenant,
        fields.require_id(data, "agentId", _IN),
        fields.require_id(data, "runId", _IN),
    )


async def _runs_create(stores: Stores, caller: Principal, data: Document) -> Document | None:
    run = c.validate_run(data.get("run"), f"{_IN}.run")
    return await stores.runs.create(caller.tenant, run, caller.name)


async def _runs_update(stores: Stores, caller: Principal, data: Document) -> Document | None:
    return await stores.runs.update(caller.tenant, c.validate_run(data.get("run"), f"{_IN}.run"))


async def _runs_delete(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.require_object(data.get("filter"), field)
    await stores.runs.delete(
        caller.tenant,
        fields.optional_id_list(filter_, "agentIds", field),
        fields.optional_id_list(filter_, "runIds", field),
    )
    return None


async def _runs_list(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.optional_object(data, "filter", _IN)
    limit = fields.optional_limit(filter_, field, fields.DEFAULT_RUN_LIMIT)
    rows = await stores.runs.list(
        caller.tenant,
        agent_ids=fields.optional_id_list(filter_, "agentIds", field),
        run_ids=fields.optional_id_list(filter_, "runIds", field),
        after=c.parse_run_cursor(filter_, field),
        limit=limit + 1,
    )
    items, more = c.page(rows, limit)
    result: Document = {"items": items}
    if more and (cursor := c.run_cursor(run_position(items[-1]))) is not None:
        result["nextCursor"] = cursor
    return result


# -- runEvents ------------------------------------------------------------------------


async def _events_append(stores: Stores, caller: Principal, data: Document) -> Document | None:
    return await stores.run_events.append(caller.tenant, c.new_event(data, _IN))


async def _events_list(stores: Stores, caller: Principal, data: Document) -> Document | None:
    run_id = fields.require_id(data, "runId", _IN)
    limit = fields.optional_limit(data, _IN, fields.DEFAULT_EVENT_LIMIT)
    rows = await stores.run_events.list(
        caller.tenant, run_id, after_seq=c.parse_offset(data, _IN), limit=limit + 1
    )
    items, more = c.page(rows, limit)
    result: Document = {"items": items}
    if more:
        result["nextOffset"] = items[-1]["offset"]
    return result


async def _events_delete(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.require_object(data.get("filter"), field)
    await stores.run_events.delete(caller.tenant, fields.optional_id_list(filter_, "runIds", field))
    return None


# -- checkpoints ----------------------------------------------------------------------


async def _checkpoints_get(stores: Stores, caller: Principal, data: Document) -> Document | None:
    blob = await stores.checkpoints.get(
        caller.tenant,
        fields.require_id(data, "agentId", _IN),
        fields.require_id(data, "blobId", _IN),
    )
    if blob is None:
        return {"found": False}
    if len(blob) > LARGE_ANSWER_BYTES:
        # Its text is written piece by piece as the answer is sent, off the event loop
        # (wire/large_answers.py): never whole, never on the loop.
        return {"found": True, "data": BlobAnswer(blob)}
    pieces = c.base64_pieces(blob)
    # Unless the backend keeps the bytes, they are freed before the pieces are joined:
    # the blob, its text in pieces and the joined text are never alive all at once.
    del blob
    return {"found": True, "data": "".join(pieces)}


async def _checkpoints_create(stores: Stores, caller: Principal, data: Document) -> Document | None:
    await stores.checkpoints.create(
        caller.tenant,
        fields.require_id(data, "agentId", _IN),
        fields.require_id(data, "blobId", _IN),
        c.take_blob(data, _IN),
    )
    return None


async def _checkpoints_update(stores: Stores, caller: Principal, data: Document) -> Document | None:
    await stores.checkpoints.update(
        caller.tenant,
        fields.require_id(data, "agentId", _IN),
        fields.require_id(data, "blobId", _IN),
        c.take_blob(data, _IN),
    )
    return None


async def _checkpoints_delete(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.require_object(data.get("filter"), field)
    await stores.checkpoints.delete(
        caller.tenant,
        fields.optional_id_list(filter_, "agentIds", field),
        fields.optional_id_list(filter_, "blobIds", field),
    )
    return None


async def _checkpoints_list(stores: Stores, caller: Principal, data: Document) -> Document | None:
    field = f"{_IN}.filter"
    filter_ = fields.optional_object(data, "filter", _IN)
    limit = fields.optional_limit(filter_, field, fields.DEFAULT_CHECKPOINT_LIMIT)
    refs = await stores.checkpoints.list(
        caller.tenant,
        agent_ids=fields.optional_id_list(filter_, "agentIds", field),
        blob_ids=fields.optional_id_list(filter_, "blobIds", field),
        after=c.parse_blob_cursor(filter_, field),
        limit=limit + 1,
    )
    page, more = c.page(refs, limit)
    result: Document = {"items": [ref.blob_id for ref in page]}
    if more:
        result["nextCursor"] = c.blob_cursor(page[-1])
    return result


HANDLERS: dict[str, dict[str, Handler]] = {
    "agents": {
        "get": _agents_get,
        "create": _agents_create,
        "update": _agents_update,
        "delete": _agents_delete,
        "list": _agents_list,
    },
    "runs": {
        "get": _runs_get,
        "create": _runs_create,
        "update": _runs_update,
        "delete": _runs_delete,
        "list": _runs_list,
    },
    "runEvents": {
        "append": _events_append,
        "list": _events_list,
        "delete": _events_delete,
    },
    "checkpoints": {
        "get": _checkpoints_get,
        "create": _checkpoints_create,
        "update": _checkpoints_update,
        "delete": _checkpoints_delete,
        "list": _checkpoints_list,
    },
}


#: Handlers whose answers are not worth gzipping: checkpoint blobs are base64 of
#: encrypted bytes, which gzip shrinks by about a quarter for more CPU than the whole
#: call takes otherwise (bench load, checkpoints.get on memory: 29% of the samples in gzip).
INCOMPRESSIBLE: frozenset[Handler] = frozenset({_checkpoints_get})

#: Methods a ``read`` token may call; everything else needs ``write`` (or ``admin``).
READ_METHODS = frozenset({"get", "list"})
#: Calls the audit log may have to record (audit.is_destructive decides on the input).
_MAYBE_DESTRUCTIVE = frozenset({("agents", "update")})


def needed_scope(method: str) -> Scope:
    """The scope a CallStore method needs (the administrative commands need ``admin``)."""
    return Scope.READ if method in READ_METHODS else Scope.WRITE


class _Route:
    """What ``call_store`` needs of one method, worked out once rather than per call."""

    __slots__ = ("audited", "compressible", "handler", "needed")

    def __init__(self, substore: str, method: str, handler: Handler) -> None:
        self.handler = handler
        self.needed = needed_scope(method)
        self.compressible = handler not in INCOMPRESSIBLE
        self.audited = method == "delete" or (substore, method) in _MAYBE_DESTRUCTIVE


_ROUTES: dict[str, dict[str, _Route]] = {
    substore: {method: _Route(substore, method, handler) for method, handler in methods.items()}
    for substore, methods in HANDLERS.items()
}


async def call_store(
    stores: Stores, substore: Any, method: Any, data: Any, *, principal: Principal
) -> Answer:
    """Run one CallStore call for ``principal``, on its tenant's items only.

    Raises ConnectError for anything the client got wrong, and ``permission_denied``
    when the principal's scope does not cover the method.
    """
    if not isinstance(substore, str) or not substore:
        raise ConnectError(Code.INVALID_ARGUMENT, "substore must be a non-empty string")
    if not isinstance(method, str) or not method:
        raise ConnectError(Code.INVALID_ARGUMENT, "method must be a non-empty string")
    methods = _ROUTES.get(substore)
    if methods is None:
        raise ConnectError(Code.UNIMPLEMENTED, f"unknown substore {substore!r}")
    route = methods.get(method)
    if route is None:
        raise ConnectError(Code.UNIMPLEMENTED, f"unknown method {substore}.{method}")
    needed = route.needed
    if not principal.scope.allows(needed):
        raise ConnectError(
            Code.PERMISSION_DENIED,
            f"token {principal.name!r} has scope {principal.scope.value}; "
            f"{substore}.{method} needs {needed.value}",
        )
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        raise ConnectError(Code.INVALID_ARGUMENT, "input must be an object")
    output = await route.handler(stores, principal, data)
    if route.audited and audit.is_destructive(substore, method, data):
        audit.record(principal, substore, method, data)
    return output, route.compressible
