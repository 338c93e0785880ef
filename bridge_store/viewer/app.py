"""The viewer app over a server's stores, and who may read with it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette

from ..auth import Principal, TokenRegistry
from ..stores import Stores
from .pages import Context
from .reader import HistoryReader, in_process
from .search import searcher_for
from .session import Sessions
from .web import Viewer


def token_principal(tokens: TokenRegistry) -> Callable[[str], Awaitable[Principal | None]]:
    """The principal a presented token stands for (the registry compares in constant
    time); the viewer reads what that principal's tenant holds."""

    async def authenticate(token: str) -> Principal | None:
        return tokens.resolve(token.encode("utf-8"))

    return authenticate


def create_viewer(stores: Callable[[], Stores], tokens: TokenRegistry) -> Starlette:
    """The viewer over the stores ``stores()`` returns (asked per request: they open later)."""

    def context_for(principal: Principal) -> Context:
        # Reads go through dispatch as the principal: its tenant, its scope.
        reader = HistoryReader(in_process(stores, principal))
        return Context(reader=reader, searcher=searcher_for(stores(), reader))

    sessions = Sessions.with_new_secret(token_principal(tokens))
    return Viewer(sessions, context_for).app()
