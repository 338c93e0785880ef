"""A bridge's agent calls, translated between its checkout's paths and workspace keys.

Only ``agents`` calls name a ``cwd``; every other call passes untouched, so the hot
path (run events) costs nothing more. With a checkout (the bridge's store URL carried
one, :mod:`.segment`):

- on the way in, a ``cwd`` inside the checkout's root becomes the workspace key
  (:func:`.paths.key`), and the path as the bridge gave it is kept beside it in
  :data:`WORKED_IN` (the viewer shows where the agent last worked);
- on the way out, a key of the same workspace becomes the same directory inside
  *this* checkout's root; a key of another workspace, and any key for a bridge with
  no checkout, the path it was last written from.

``WORKED_IN`` is never shown to a bridge, and a ``cwd`` that starts like a key must be
one (a sub directory with ``..`` never is).
"""

from __future__ import annotations

from typing import Any

from ..errors import invalid_argument
from ..types import Document
from .paths import AS_STORED, KEY_PREFIX, Checkout, at, inside, key, parse_key

#: The agent document field holding the ``cwd`` its last writer gave, for a keyed one.
WORKED_IN = "bridgeStoreWorkedIn"
_WRITES = frozenset({"create", "update"})
_FILTERED = frozenset({"list", "delete"})
_DOCUMENT_ANSWERS = frozenset({"get", "create", "update"})


def inbound(checkout: Checkout | None, substore: Any, method: Any, data: Any) -> Any:
    """A call's input with each ``cwd`` as the store keeps it. Anything but an agents
    call by a method name (a list or a number as the method, which the contract's
    checks then refuse) passes untouched."""
    if substore != "agents" or not isinstance(method, str) or checkout is AS_STORED:
        return data
    if not isinstance(data, dict):
        return data
    if method in _WRITES:
        agent = data.get("agent")
        if isinstance(agent, dict):
            return {**data, "agent": _agent_in(checkout, agent)}
    elif method in _FILTERED:
        filter_ = data.get("filter")
        if isinstance(filter_, dict) and isinstance(filter_.get("cwd"), str):
            return {**data, "filter": {**filter_, "cwd": _cwd_in(checkout, filter_["cwd"])}}
    return data


def outbound(checkout: Checkout | None, substore: Any, method: Any, output: Any) -> Any:
    """A call's output with each ``cwd`` as the calling bridge's checkout has it."""
    if substore != "agents" or not isinstance(method, str) or checkout is AS_STORED:
        return output
    if not isinstance(output, dict):
        return output
    if method in _DOCUMENT_ANSWERS:
        return agent_out(checkout, output)
    if method == "list" and isinstance(output.get("items"), list):
        return {**output, "items": [agent_out(checkout, item) for item in output["items"]]}
    return output


def _cwd_in(checkout: Checkout | None, cwd: str) -> str:
    if cwd.startswith(KEY_PREFIX):
        # A key as this server answered it (a bridge with no checkout may write one
        # back); anything else that looks like one would read as a path it is not.
        if parse_key(cwd) is None:
            raise invalid_argument(f"a cwd starting with {KEY_PREFIX!r} must be a workspace key")
        return cwd
    if checkout is None:
        return cwd
    sub = inside(checkout.root, cwd)
    return cwd if sub is None else key(checkout.workspace, sub)


def _agent_in(checkout: Checkout | None, agent: Document) -> Document:
    cwd = agent.get("cwd")
    written = {name: value for name, value in agent.items() if name != WORKED_IN}
    if not isinstance(cwd, str):
        return written  # the contract's checks say what is wrong with it
    stored = _cwd_in(checkout, cwd)
    if stored != cwd:
        written["cwd"] = stored
        written[WORKED_IN] = cwd
    return written


def agent_out(checkout: Checkout | None, agent: Any) -> Any:
    """One agent document as a bridge in ``checkout`` (None: in no checkout) sees it."""
    if not isinstance(agent, dict):
        return agent
    cwd = agent.get("cwd")
    if not isinstance(cwd, str) or not cwd.startswith(KEY_PREFIX):
        if WORKED_IN in agent:
            return {name: value for name, value in agent.items() if name != WORKED_IN}
        return agent
    shown = {name: value for name, value in agent.items() if name != WORKED_IN}
    parsed = parse_key(cwd)
    if checkout is not None and parsed is not None and parsed[0] == checkout.workspace:
        shown["cwd"] = at(checkout.root, parsed[1])
    elif isinstance(agent.get(WORKED_IN), str):
        shown["cwd"] = agent[WORKED_IN]
    return shown
