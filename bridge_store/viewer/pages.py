"""The viewer's pages: one function each, returning the data its template shows.

Each function answers both the page and its ``?format=json`` twin (datasette's way:
the template renders exactly the data a script gets). The transcript also answers
``?format=fragment``: the same page's blocks as HTML, for live updates and paging.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams

from ..errors import invalid_argument, not_found
from ..types import Document
from . import queries
from .reader import HistoryReader
from .search import Searcher, search
from .transcript import TranscriptBuilder, usage_counts
from .welcome import Welcome

#: Raw event pages are for looking at a few events closely.
DEFAULT_RAW_EVENTS = 50


@dataclass(frozen=True, slots=True)
class View:
    """A page: its template, its title and the data both it and ``?format=json`` show."""

    template: str
    title: str
    data: Document


@dataclass(frozen=True, slots=True)
class Context:
    """What a signed-in request reads with, scoped to its principal's tenant.

    ``welcome`` is what an empty agents list tells that principal; ``server_url`` the
    server's address as the request reached it (for the command that connects a bridge).
    """

    reader: HistoryReader
    searcher: Searcher
    welcome: Welcome | None = None
    server_url: str = ""


PageFunction = Callable[[Context, QueryParams], Awaitable[View]]


def _required(params: QueryParams, name: str) -> str:
    value = params.get(name)
    if not value:
        raise invalid_argument(f"the {name!r} parameter is required")
    return value


def _flag(params: QueryParams, name: str) -> bool:
    return params.get(name, "") not in ("", "0", "false", "off")


def agent_filters(params: QueryParams) -> queries.AgentFilters:
    status = params.get("status") or None
    if status is not None and status not in queries.AGENT_STATUSES:
        raise invalid_argument(f"status must be one of {', '.join(queries.AGENT_STATUSES)}")
    return queries.AgentFilters(
        cwd=params.get("cwd") or None,
        status=status,
        name=params.get("name") or None,
        archived=_flag(params, "archived"),
    )


async def agents(context: Context, params: QueryParams) -> View:
    data = await queries.agents_page(
        context.reader,
        agent_filters(params),
        cursor=params.get("cursor") or None,
        limit=queries.page_limit(params.get("limit"), queries.DEFAULT_AGENTS_PAGE),
    )
    data["cursor"] = params.get("cursor") or None
    # A page size given in the address stays in the pager's links, like the filters.
    data["limit"] = params.get("limit") or None
    data["statuses"] = list(queries.AGENT_STATUSES)
    unfiltered = not any(data["filters"].values()) and data["cursor"] is None
    if context.welcome is not None and unfiltered and not data["agents"] and not data["next"]:
        # The first page anyone sees: how to fill it, rather than "nothing matches".
        data["welcome"] = await context.welcome.describe(context.server_url)
    return View("agents.html", "Agents", data)


async def agent(context: Context, params: QueryParams) -> View:
    data = await queries.agent_page(context.reader, _required(params, "id"))
    return View("agent.html", data["agent"].get("name") or data["agent"]["agentId"], data)


async def run(context: Context, params: QueryParams) -> View:
    data = await queries.transcript_page(
        context.reader,
        _required(params, "agent"),
        _required(params, "id"),
        after=params.get("after") or None,
        limit=queries.page_limit(params.get("limit"), queries.DEFAULT_EVENTS_PAGE),
    )
    name = (data["agent"] or {}).get("name") or data["run"]["agentId"]
    return View("run.html", f"{name}: turn {data['run'].get('turnNumber')}", data)


async def events(context: Context, params: QueryParams) -> View:
    """Stored events as they are, a page at a time: the raw view behind every block."""
    agent_id, run_id = _required(params, "agent"), _required(params, "run")
    found = await context.reader.run(agent_id, run_id)
    if found is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    after = params.get("after") or None
    page = await context.reader.events(
        run_id, after=after, limit=queries.page_limit(params.get("limit"), DEFAULT_RAW_EVENTS)
    )
    data = {"run": found, "after": after, "events": page.items, "next": page.next}
    return View("events.html", f"Events of run {run_id}", data)


async def find_run(context: Context, params: QueryParams) -> Document:
    """The run a bare run id names (for /ui/run?id= links without an agent)."""
    return await queries.find_run(context.reader, _required(params, "id"))


async def search_page(context: Context, params: QueryParams) -> View:
    query = params.get("q", "")
    page = await search(context.searcher, query, cursor=params.get("cursor") or None)
    data = page.to_json()
    data["cursor"] = params.get("cursor") or None
    return View("search.html", f"Search: {query}" if query else "Search", data)


# -- exports --------------------------------------------------------------------------


async def export_run(context: Context, agent_id: str, run_id: str) -> AsyncIterator[Document]:
    """One run as JSON lines: the run, then every event (checked before streaming)."""
    found = await context.reader.run(agent_id, run_id)
    if found is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    return _run_lines(context.reader, found)


async def _run_lines(reader: HistoryReader, found: Document) -> AsyncIterator[Document]:
    yield {"type": "run", "run": found}
    async for event in reader.all_events(found["runId"]):
        yield {"type": "event", "event": event}


async def export_agent(context: Context, agent_id: str) -> AsyncIterator[Document]:
    """One agent with all its runs and their events as JSON lines."""
    found = await context.reader.agent(agent_id)
    if found is None:
        raise not_found(f"no agent {agent_id!r}")
    return _agent_lines(context.reader, found)


async def _agent_lines(reader: HistoryReader, found: Document) -> AsyncIterator[Document]:
    yield {"type": "agent", "agent": found}
    for each in await reader.all_runs(found["agentId"]):
        async for line in _run_lines(reader, each):
            yield line


async def whole_transcript(context: Context, agent_id: str, run_id: str) -> dict[str, Any]:
    """Everything a Markdown export needs: the run, its agent and all its blocks."""
    found = await context.reader.run(agent_id, run_id)
    if found is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    builder = TranscriptBuilder()
    async for event in context.reader.all_events(run_id):
        builder.add(event)
    return {
        "agent": await context.reader.agent(agent_id),
        "run": found,
        "blocks": [block.to_json() for block in builder.blocks],
        "usage": usage_counts(found.get("usage")) or builder.usage,
    }
