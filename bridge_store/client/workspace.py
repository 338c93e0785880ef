"""The store URL a bridge gets for the directory it works in (docs/team.md).

When the directory is in a workspace (:mod:`bridge_store.workspaces.identity`), the
bridge is given the store's URL with the checkout in its path, so the server answers
it with the agents every checkout of the workspace made, each in this checkout's
paths. Anywhere else it gets the store's URL as it is, and agents keep their path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..reaching import server_url
from ..workspaces import segment
from ..workspaces.identity import Rule, checkout_of, parse_rule
from ..workspaces.paths import Checkout, inside

#: Workspace rules every launcher reads, ``PATTERN=NAME`` separated by ``;``.
RULES_ENV = "BRIDGE_STORE_WORKSPACE_RULES"


@dataclass(frozen=True, slots=True)
class BridgeWorkspace:
    """Where a bridge works: its default ``cwd``, the checkout that is in (None: in no
    workspace) and the store URL it is given."""

    directory: str
    checkout: Checkout | None
    store_url: str


def rules_from(given: Sequence[str | Rule], environ: dict[str, str] | None = None) -> list[Rule]:
    """The rules given (``PATTERN=NAME`` or pairs), then ``$BRIDGE_STORE_WORKSPACE_RULES``."""
    rules = [parse_rule(rule) if isinstance(rule, str) else rule for rule in given]
    text = (environ if environ is not None else dict(os.environ)).get(RULES_ENV, "")
    rules += [parse_rule(part.strip()) for part in text.split(";") if part.strip()]
    return rules


def bridge_workspace(
    store_url: str, directory: str | os.PathLike[str], rules: Sequence[Rule] = ()
) -> BridgeWorkspace:
    """Where a bridge started in ``directory`` works, against the store at ``store_url``
    (ending in ``/``). A directory reached through a symlink is the real one when the
    checkout's root is found only that way: the server maps paths, never links."""
    store_url = server_url(store_url)
    path = os.path.abspath(os.fspath(directory))
    if segment.PREFIX in urlsplit(store_url).path:
        # Already a workspace's URL (bridge-store workspace-url printed it): as given.
        return BridgeWorkspace(path, None, store_url)
    checkout = checkout_of(path, rules)
    if checkout is None:
        return BridgeWorkspace(path, None, store_url)
    if inside(checkout.root, path) is None:
        path = os.path.realpath(path)
    return BridgeWorkspace(path, checkout, segment.store_url(store_url, checkout))
