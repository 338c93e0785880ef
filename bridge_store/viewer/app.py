"""The viewer app over a server's stores, and who may read with it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.applications import Starlette

from ..security.auth import Principal, TokenRegistry
from ..stores import Stores
from .pages import Context
from .reader import HistoryReader, in_process
from .search import search_index, searcher_for
from .session import Sessions
from .web import Viewer
from .welcome import BridgeHint, Welcome, sole_holder


def token_principal(tokens: TokenRegistry) -> Callable[[str], Awaitable[Principal | None]]:
    """The principal a presented token stands for (the registry compares in constant
    time); the viewer reads what that principal's tenant holds."""

    async def authenticate(token: str) -> Principal | None:
        return tokens.resolve(token.encode("utf-8"))

    return authenticate


def create_viewer(
    stores: Callable[[], Stores],
    tokens: TokenRegistry,
    backend_stores: Callable[[], Stores] | None = None,
    *,
    bridge_hint: BridgeHint | None = None,
) -> Starlette:
    """The viewer over the stores ``stores()`` returns (asked per request: they open later).

    ``backend_stores()`` are the same substores before the server wrapped them (to seal
    secrets, to count bytes): where search looks for a backend's own index. Without
    it, ``stores()`` are taken to be the backends' own. ``bridge_hint`` says where a
    bridge finds the server's token, for the empty agents page; None for a viewer
    without a CallStore endpoint.
    """
    unwrapped = backend_stores or stores
    # Named tokens see only their own tenant, never that others exist.
    store_wide = sole_holder(tokens)

    async def tenants() -> Sequence[str]:
        return await unwrapped().agents.tenants()

    def context_for(principal: Principal) -> Context:
        # Every read goes through dispatch as the principal: its tenant, its scope. The
        # index, which dispatch does not see, is asked for that tenant alone.
        reader = HistoryReader(in_process(stores, principal))
        searcher = searcher_for(search_index(unwrapped()), principal.tenant, reader)
        welcome = Welcome(principal.tenant, bridge_hint, tenants if store_wide else None)
        return Context(reader=reader, searcher=searcher, welcome=welcome)

    sessions = Sessions.with_new_secret(token_principal(tokens))
    return Viewer(sessions, context_for).app()
