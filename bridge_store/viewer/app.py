"""The viewer app over a server's stores, and who may read with it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.applications import Starlette

from ..backend.history import run_history
from ..backend.shares import run_shares
from ..backend.statistics import run_statistics
from ..pricing.book import PriceBook
from ..security.auth import Principal, TokenRegistry
from ..stack.stores import OpenStack, Stores
from .activity import Activity
from .pages import Context
from .reader import HistoryReader, in_process
from .search import search_index, searcher_for
from .session import Sessions
from .session_keys import SessionKeys
from .web import Viewer
from .welcome import BridgeHint, Welcome, sole_holder


def token_principal(tokens: TokenRegistry) -> Callable[[str], Awaitable[Principal | None]]:
    """The principal a presented token stands for (the registry compares in constant
    time); the viewer reads what that principal's tenant holds."""

    async def authenticate(token: str) -> Principal | None:
        return tokens.resolve(token.encode("utf-8"))

    return authenticate


def create_viewer(
    stack: Callable[[], OpenStack],
    tokens: TokenRegistry,
    prices: PriceBook | None = None,
    *,
    bridge_hint: BridgeHint | None = None,
    session_keys: SessionKeys | None = None,
) -> Starlette:
    """The viewer over the open stores ``stack()`` returns (asked per request: they open
    later, and it raises ``unavailable`` until they have).

    Pages read its served stores; search looks for a backend's own index beneath them,
    and the run list and overview for a backend's own summaries. ``prices`` turn tokens
    into money (the table of the moment: the book reads its file again on SIGHUP).
    ``bridge_hint`` says where a bridge finds the server's token, for the empty agents
    page; None for a viewer without a CallStore endpoint.
    ``session_keys`` seal and end its sessions: those every worker of ``serve
    --workers`` shares; by default new ones, for a server of one process.
    """

    def stores() -> Stores:
        return stack().stores

    def unwrapped() -> Stores:
        return stack().stores.beneath()

    # Named tokens see only their own tenant, never that others exist.
    store_wide = sole_holder(tokens)

    async def tenants() -> Sequence[str]:
        return await unwrapped().agents.tenants()

    def context_for(principal: Principal) -> Context:
        # Every read goes through dispatch as the principal: its tenant, its scope. The
        # index, which dispatch does not see, is asked for that tenant alone.
        reader = HistoryReader(in_process(stores, principal))
        searcher = searcher_for(search_index(unwrapped()), principal.tenant, reader)
        activity = Activity(
            stores,
            principal.tenant,
            history=lambda: run_history(unwrapped().agents, unwrapped().runs),
            statistics=lambda: run_statistics(unwrapped().agents, unwrapped().runs),
            shares=lambda: run_shares(unwrapped().agents, unwrapped().runs),
        )
        welcome = Welcome(principal.tenant, bridge_hint, tenants if store_wide else None)
        return Context(
            reader, searcher, activity, principal, prices, welcome, server_token=store_wide
        )

    sessions = Sessions(token_principal(tokens), session_keys or SessionKeys.new())
    return Viewer(sessions, context_for).app()
