"""The one way the viewer and the history CLI read a store: CallStore reads, nothing else.

Every page, export, search scan and CLI command reads through a :class:`HistoryReader`,
which makes CallStore ``get``/``list`` calls through one :data:`CallStoreFn`. Two of
those exist: :func:`in_process` over the dispatch layer (``serve``'s ``/ui/`` and
``bridge-store ui``) and :class:`RemoteCallStore` speaking CallStore JSON to a running
server (the CLI's ``--store-callback-url``). Scoping reads to a caller (its tenant)
belongs in the function handed to the reader, in this one place.

The reader never writes, and never hands out an agent's ``sdkMetadata``: it holds the
agent's blob encryption key, which no read-only view should show or export.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..backend.tenants import is_valid_tenant
from ..errors import Code, ConnectError, unavailable
from ..reaching import rejected_token, server_url, unreachable
from ..rpc.connect import CALL_STORE_PATH
from ..rpc.dispatch import call_store
from ..security.auth import Principal
from ..stack.stores import Stores
from ..types import Document
from ..urls import redact
from ..workspaces.segment import AS_STORED_SEGMENT

#: (substore, method, input) -> output: one CallStore call.
CallStoreFn = Callable[[str, str, Document], Awaitable[Document | None]]

#: Only these reach the store; a reader that is asked for anything else is a bug.
READ_METHODS = frozenset({"get", "list"})

#: Fields of an agent document the viewer never shows (see the module docstring).
SECRET_AGENT_FIELDS = ("sdkMetadata",)

#: How long one remote CallStore call may take before the CLI gives up on it.
REMOTE_TIMEOUT_SECONDS = 30.0

#: Largest page the store serves (contract.MAX_LIMIT); reading everything uses it.
FULL_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list and the store's cursor (or offset) for the next, if any."""

    items: list[Document]
    next: str | None


def public_agent(agent: Document) -> Document:
    return {key: value for key, value in agent.items() if key not in SECRET_AGENT_FIELDS}


@dataclass(frozen=True, slots=True)
class HistoryReader:
    """Read-only history: agents, runs and run events, paged by the store's own cursors.

    ``tenant`` is the tenant read, when the reader knows it; ``tenants`` lists the
    store's tenants holding agents, given only to a reader of the whole store (a CLI
    reading a store URL), for saying where history is when this tenant has none.
    """

    call: CallStoreFn
    tenant: str | None = None
    tenants: Callable[[], Awaitable[Sequence[str]]] | None = None

    async def other_tenants(self) -> list[str]:
        """The tenants besides this one holding agents (none when not to be told).

        Only valid tenant names: a store written around the server (a hostile row, a
        key with terminal escapes in it) cannot put text on the reader's terminal.
        """
        if self.tenants is None:
            return []
        found = set(await self.tenants()) - {self.tenant}
        return sorted(name for name in found if is_valid_tenant(name))

    async def _read(self, substore: str, method: str, data: Document) -> Document | None:
        assert method in READ_METHODS, method
        return await self.call(substore, method, data)

    async def agents(self, *, cwd: str | None, cursor: str | None, limit: int) -> Page:
        """Agents newest first (``updatedAt`` descending), optionally of one workspace."""
        filter_: Document = {"limit": limit}
        if cwd:
            filter_["cwd"] = cwd
        if cursor:
            filter_["cursor"] = cursor
        page = await self._read("agents", "list", {"filter": filter_}) or {}
        return Page([public_agent(a) for a in page.get("items", [])], page.get("nextCursor"))

    async def agent(self, agent_id: str) -> Document | None:
        found = await self._read("agents", "get", {"agentId": agent_id})
        return public_agent(found) if found else None

    async def runs(self, agent_id: str, *, cursor: str | None, limit: int) -> Page:
        """One agent's runs in store order (``turnNumber`` ascending)."""
        filter_: Document = {"agentIds": [agent_id], "limit": limit}
        if cursor:
            filter_["cursor"] = cursor
        page = await self._read("runs", "list", {"filter": filter_}) or {}
        return Page(list(page.get("items", [])), page.get("nextCursor"))

    async def all_runs(self, agent_id: str) -> list[Document]:
        """Every run of one agent, oldest first.

        The store lists runs by turn ascending only, so showing the newest first means
        reading them all; an agent's turns are few next to its events.
        """
        runs: list[Document] = []
        cursor: str | None = None
        while True:
            page = await self.runs(agent_id, cursor=cursor, limit=FULL_PAGE)
            runs.extend(page.items)
            if page.next is None:
                return runs
            cursor = page.next

    async def every_run(self) -> AsyncIterator[list[Document]]:
        """Every run of the tenant, a store page at a time, in store order (by turn)."""
        cursor: str | None = None
        while True:
            filter_: Document = {"limit": FULL_PAGE}
            if cursor:
                filter_["cursor"] = cursor
            page = await self._read("runs", "list", {"filter": filter_}) or {}
            yield list(page.get("items", []))
            cursor = page.get("nextCursor")
            if cursor is None:
                return

    async def run(self, agent_id: str, run_id: str) -> Document | None:
        return await self._read("runs", "get", {"agentId": agent_id, "runId": run_id})

    async def runs_with_id(self, run_id: str) -> list[Document]:
        """The runs with this id, across agents (a run is identified by the pair)."""
        page = await self._read("runs", "list", {"filter": {"runIds": [run_id], "limit": 10}})
        return list((page or {}).get("items", []))

    async def events(self, run_id: str, *, after: str | None, limit: int) -> Page:
        """Events with offset greater than ``after``, ascending; ``next`` if more follow."""
        request: Document = {"runId": run_id, "limit": limit}
        if after:
            request["afterOffset"] = after
        page = await self._read("runEvents", "list", request) or {}
        return Page(list(page.get("items", [])), page.get("nextOffset"))

    async def all_events(self, run_id: str, *, after: str | None = None) -> AsyncIterator[Document]:
        """Every event of a run from ``after`` on, a page at a time (for exports)."""
        while True:
            page = await self.events(run_id, after=after, limit=FULL_PAGE)
            for event in page.items:
                yield event
            if page.next is None:
                return
            after = page.next


def in_process(stores: Callable[[], Stores], principal: Principal) -> CallStoreFn:
    """CallStore reads through the dispatch layer, as the server runs them, made as
    ``principal`` (so of its tenant only).

    ``stores`` is asked on every call: the server opens its stores in its lifespan,
    after the viewer is built.
    """

    async def call(substore: str, method: str, data: Document) -> Document | None:
        output, _ = await call_store(stores(), substore, method, data, principal=principal)
        return output

    return call


@dataclass
class RemoteCallStore:
    """CallStore JSON over HTTP to a running bridge-store server, with a bearer token.

    Uses the standard library (in a worker thread, bounded by a timeout) like
    ``client.check_store``: one POST at a time is all a CLI needs, not worth a
    dependency. Connect errors come back as :class:`ConnectError` with their code; a
    refused token and an unreachable server as one line naming the fix
    (:mod:`bridge_store.reaching`). ``url`` may be the viewer's address (``.../ui/``);
    ``token_source`` says where the token was read, for that line.
    """

    url: str
    token: str = field(repr=False)
    timeout: float = REMOTE_TIMEOUT_SECONDS
    token_source: str | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the store URL must start with http:// or https://, not {self.url!r}")
        self.url = server_url(self.url)
        # Agents as the store keeps them (workspace keys and where each last worked,
        # bridge_store/workspaces); a server older than workspaces answers 404 there,
        # and is then read at the plain path, where there are none.
        self._endpoint = f"{self.url.rstrip('/')}/w/{AS_STORED_SEGMENT}{CALL_STORE_PATH}"
        self._plain = self.url.rstrip("/") + CALL_STORE_PATH
        # No proxies: the store is reached directly, as the bridge reaches it.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    async def __call__(self, substore: str, method: str, data: Document) -> Document | None:
        return await asyncio.to_thread(self._post, substore, method, data)

    def _post(self, substore: str, method: str, data: Document) -> Document | None:
        try:
            return self._post_to(self._endpoint, substore, method, data)
        except _NoSuchPath:
            self._endpoint = self._plain
            return self._post_to(self._endpoint, substore, method, data)

    def _post_to(
        self, endpoint: str, substore: str, method: str, data: Document
    ) -> Document | None:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            endpoint,
            data=json.dumps({"substore": substore, "method": method, "input": data}).encode(),
            headers={
                "Content-Type": "application/json",
                "Connect-Protocol-Version": "1",
                "Authorization": f"Bearer {self.token}",
            },
            method="POST",
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            if error.code == 404 and endpoint != self._plain:
                error.close()
                raise _NoSuchPath from None
            raise remote_error(error, self.url, self.token_source) from None
        except (urllib.error.URLError, OSError) as error:
            raise unavailable(unreachable(self.url, error)) from None
        except ValueError:
            raise unavailable(
                f"{redact(self.url)} does not answer like a CallStore server"
            ) from None
        output = body.get("output") if isinstance(body, dict) else None
        return output if isinstance(output, dict) else None


class _NoSuchPath(Exception):
    """The server has no workspace paths: it is older than workspaces."""


def remote_error(error: urllib.error.HTTPError, url: str, token_source: str | None) -> ConnectError:
    """A server's error answer as a ConnectError; a refused token says what to give."""
    with error:  # the answer's connection, closed whether or not its body is read
        if error.code == 401:
            return ConnectError(Code.UNAUTHENTICATED, rejected_token(url, token_source))
        try:
            body = json.loads(error.read(64 * 1024))
            return ConnectError(Code(body["code"]), str(body.get("message", "")))
        except (ValueError, KeyError, TypeError):
            return unavailable(f"the store answered HTTP {error.code}")
