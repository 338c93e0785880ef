"""The audit log: one line per destructive call, naming who did it and to what.

Destructive calls are every ``delete`` and an agents ``update`` that sets the status
``archived``. The line holds the token's name (never the token), its tenant, the
substore, the method and the filter's ids, never document content. It goes to the
``bridge_store.audit`` logger at INFO, so a deployment can route it on its own.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .auth import Principal

logger = logging.getLogger("bridge_store.audit")

#: Ids shown per filter list; a longer list is cut and says how many more it had.
MAX_IDS_SHOWN = 50
_FILTER_KEYS = ("agentIds", "runIds", "blobIds", "cwd")


def is_destructive(substore: str, method: str, data: dict[str, Any]) -> bool:
    if method == "delete":
        return True
    if substore == "agents" and method == "update":
        agent = data.get("agent")
        return isinstance(agent, dict) and agent.get("status") == "archived"
    return False


def _shown(value: Any) -> Any:
    if isinstance(value, list) and len(value) > MAX_IDS_SHOWN:
        return [*value[:MAX_IDS_SHOWN], f"(+{len(value) - MAX_IDS_SHOWN} more)"]
    return value


def targets(substore: str, method: str, data: dict[str, Any]) -> dict[str, Any]:
    """What a destructive call names: its filter's ids, or the archived agent's id."""
    if method == "update":
        return {"agentId": data["agent"]["agentId"]}
    filter_ = data.get("filter")
    if not isinstance(filter_, dict):
        return {}
    return {key: _shown(filter_[key]) for key in _FILTER_KEYS if filter_.get(key) is not None}


def record(principal: Principal, substore: str, method: str, data: dict[str, Any]) -> None:
    """Log a destructive call that succeeded (call only when :func:`is_destructive`)."""
    logger.info(
        "audit %s",
        json.dumps(
            {
                "token": principal.name,
                "tenant": principal.tenant,
                "substore": substore,
                "method": method,
                "filter": targets(substore, method, data),
            },
            ensure_ascii=True,
        ),
    )
