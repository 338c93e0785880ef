"""Recording each stored agent's workspace: what ``db upgrade`` does for workspaces.

Agents stored before workspaces (docs/team.md) keep their ``cwd``, an absolute path.
Where that path is still a directory this machine can read and is in a workspace
(:func:`~bridge_store.workspaces.identity.checkout_of`: a rule, or a git checkout with
an ``origin`` remote), the agent is kept against the workspace from then on, as a
bridge in that checkout would have written it; every other agent stays as it is.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..stack.stores import Stores
from ..workspaces.identity import Rule, checkout_of
from ..workspaces.paths import inside, is_key, key
from ..workspaces.translate import WORKED_IN
from .walk import agents_of, tenants_of


@dataclass
class WorkspaceCounts:
    """What a pass recorded: agents now kept against a workspace, and those left."""

    recorded: int = 0
    left: int = 0


async def record_workspaces(
    stores: Stores, *, tenants: Sequence[str] | None = None, rules: Sequence[Rule] = ()
) -> WorkspaceCounts:
    """Keep each agent whose path is a readable checkout against its workspace."""
    counts = WorkspaceCounts()
    found: dict[str, str | None] = {}
    for tenant in await tenants_of(stores, tenants):
        async for agent in agents_of(stores, tenant):
            cwd = agent.get("cwd")
            if not isinstance(cwd, str) or is_key(cwd):
                continue  # already kept against a workspace (or no path at all)
            if cwd not in found:
                # git and the disk, off the event loop; once per directory.
                found[cwd] = await asyncio.to_thread(workspace_key, cwd, rules)
            stored = found[cwd]
            if stored is None:
                counts.left += 1
                continue
            await stores.agents.update(tenant, {**agent, "cwd": stored, WORKED_IN: cwd})
            counts.recorded += 1
    return counts


def workspace_key(cwd: str, rules: Sequence[Rule] = ()) -> str | None:
    """The key a bridge in ``cwd``'s checkout would store for it; None if it is in no
    workspace or not a directory here."""
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        return None
    checkout = checkout_of(cwd, rules)
    if checkout is None:
        return None
    # The root is a real path (symlinks resolved), and so is the directory here.
    sub = inside(checkout.root, os.path.realpath(cwd))
    return None if sub is None else key(checkout.workspace, sub)
