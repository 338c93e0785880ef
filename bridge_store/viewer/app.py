"""The viewer app over a server's stores, and who may read with it."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.applications import Starlette

from ..stores import Stores
from .pages import Context
from .reader import HistoryReader, in_process
from .search import searcher_for
from .session import Sessions
from .web import Viewer


@dataclass(frozen=True, slots=True)
class StoreTokenHolder:
    """Whoever holds the store's bearer token: today, one token reads everything."""


def token_principal(expected: str) -> Callable[[str], Awaitable[StoreTokenHolder | None]]:
    """Checks a presented token against the store's token, in constant time."""
    holder = StoreTokenHolder()

    async def authenticate(token: str) -> StoreTokenHolder | None:
        return holder if hmac.compare_digest(token.encode(), expected.encode()) else None

    return authenticate


def create_viewer(stores: Callable[[], Stores], auth_token: str) -> Starlette:
    """The viewer over the stores ``stores()`` returns (asked per request: they open later)."""
    reader = HistoryReader(in_process(stores))

    def context_for(principal: StoreTokenHolder) -> Context:
        return Context(reader=reader, searcher=searcher_for(stores(), reader))

    sessions = Sessions.with_new_secret(token_principal(auth_token))
    return Viewer(sessions, context_for).app()
