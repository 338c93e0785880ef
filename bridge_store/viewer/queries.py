"""What each history view shows, as data: one function per view, shared by web and CLI.

The web pages render these with templates and answer them as JSON (``?format=json``);
the CLI prints them as tables or text. Every list here reads the store a page at a
time through the :class:`~bridge_store.viewer.reader.HistoryReader`, never all of it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..backend.history import UNKNOWN, RunRow, summarize_run
from ..backend.substores import agent_position
from ..errors import invalid_argument, not_found
from ..rpc.contract import agent_cursor
from ..types import Document
from ..workspaces.paths import workspace_of
from .transcript import TranscriptBuilder, usage_counts

if TYPE_CHECKING:
    # Only annotations: the CLI builds its parser from this module's constants without
    # loading the reader (and the server code under it).
    from .reader import HistoryReader

DEFAULT_AGENTS_PAGE = 50
DEFAULT_RUNS_PAGE = 50
DAY_MS = 24 * 60 * 60 * 1000
#: Filters the store cannot apply (status, name, archived) are applied to store pages
#: as they come; a page of results reads at most this many store pages, so a filter
#: matching little costs a bounded amount of work per page (the next goes on from there).
MAX_STORE_PAGES_PER_PAGE = 10
DEFAULT_EVENTS_PAGE = 200
MAX_PAGE = 1000

AGENT_STATUSES = ("idle", "running", "error", "archived")
RUN_STATUSES = ("queued", "running", "finished", "error", "cancelled", "expired")
TERMINAL_RUN_STATUSES = frozenset({"finished", "error", "cancelled", "expired"})


@dataclass(frozen=True, slots=True)
class AgentFilters:
    """The agents list's filters; each survives paging because it rides in the URL."""

    cwd: str | None = None
    status: str | None = None
    name: str | None = None
    archived: bool = False
    #: A workspace id: its agents, in any directory of any checkout (docs/team.md).
    workspace: str | None = None

    def matches(self, agent: Document) -> bool:
        if self.workspace is not None and not in_workspace(agent, self.workspace):
            return False
        status = agent.get("status")
        if self.status and status != self.status:
            return False
        if status == "archived" and not (self.archived or self.status == "archived"):
            return False
        if self.name:
            name = agent.get("name")
            if not isinstance(name, str) or self.name.casefold() not in name.casefold():
                return False
        return True

    def to_json(self) -> Document:
        return {
            "cwd": self.cwd,
            "status": self.status,
            "name": self.name,
            "archived": self.archived,
            "workspace": self.workspace,
        }


def in_workspace(agent: Document, workspace: str) -> bool:
    """Whether the agent is kept against ``workspace`` (its ``cwd`` is a key of it)."""
    cwd = agent.get("cwd")
    return isinstance(cwd, str) and workspace_of(cwd) == workspace


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def utc_day(value: str | None, name: str) -> int | None:
    """The start of a UTC day given as YYYY-MM-DD, in epoch milliseconds."""
    if not value:
        return None
    try:
        day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise invalid_argument(f"{name} must be a date, YYYY-MM-DD, not {value[:40]!r}") from None
    return int(day.timestamp() * 1000)


def page_limit(value: Any, default: int) -> int:
    """A page size from user input: a positive integer, at most MAX_PAGE."""
    if value is None or value == "":
        return default
    try:
        limit = int(value)
    except (TypeError, ValueError):
        raise invalid_argument(f"limit must be a positive integer, not {value!r}") from None
    if limit < 1:
        raise invalid_argument(f"limit must be a positive integer, not {value!r}")
    return min(limit, MAX_PAGE)


async def agents_page(
    reader: HistoryReader,
    filters: AgentFilters,
    *,
    cursor: str | None = None,
    limit: int = DEFAULT_AGENTS_PAGE,
) -> Document:
    """Agents newest first, filtered, and the cursor of the next page (``next``)."""
    items: list[Document] = []
    next_cursor = cursor
    for _ in range(MAX_STORE_PAGES_PER_PAGE):
        page = await reader.agents(cwd=filters.cwd, cursor=next_cursor, limit=limit)
        items.extend(agent for agent in page.items if filters.matches(agent))
        next_cursor = page.next
        if next_cursor is None or len(items) >= limit:
            break
    if len(items) > limit:
        # The page ends inside a store page: go on right after its last row, with the
        # cursor the store itself would have given for it (a keyset position).
        items = items[:limit]
        next_cursor = agent_cursor(agent_position(items[-1]))
    return {"filters": filters.to_json(), "agents": items, "next": next_cursor}


def run_summary(run: Document) -> Document:
    """A run as its row in lists: the document plus its duration and token counts
    (:func:`~bridge_store.backend.history.summarize_run`, what the run list sorts by)."""
    summary = summarize_run(run)
    return {
        **run,
        # Its place in time: startedAt, else createdAt (what the run list sorts by).
        "at": summary.started_at,
        "modelId": summary.model_id,
        "durationMs": summary.duration_ms,
        "tokens": usage_counts(run.get("usage")),
        "totalTokens": summary.total_tokens,
    }


async def run_rows(reader: HistoryReader, rows: Sequence[RunRow]) -> list[Document]:
    """The run list's rows: each run's summary, who started it and its agent's name and
    workspace (each agent read once per page)."""
    # Here, not at the top: the CLI builds its parsers from this module's constants
    # without loading the reader beneath agent_rows.
    from .agent_rows import display_name, has_own_name

    agents: dict[str, tuple[str, Document]] = {}
    out: list[Document] = []
    for row in rows:
        agent_id = row.run["agentId"]
        if agent_id not in agents:
            agent = await reader.agent(agent_id) or {"agentId": agent_id}
            first_run = None
            if not has_own_name(agent):
                first = await reader.runs(agent_id, cursor=None, limit=1)
                first_run = first.items[0]["runId"] if first.items else None
            agents[agent_id] = (await display_name(reader, agent, first_run), agent)
        name, agent = agents[agent_id]
        out.append(
            {
                **run_summary(row.run),
                "createdBy": row.creator or UNKNOWN,
                "agentName": name,
                "cwd": agent.get("cwd"),
            }
        )
    return out


async def agent_page(reader: HistoryReader, agent_id: str) -> Document:
    """One agent and all its runs, newest first."""
    agent = await reader.agent(agent_id)
    if agent is None:
        raise not_found(f"no agent {agent_id!r}")
    runs = [run_summary(run) for run in reversed(await reader.all_runs(agent_id))]
    model = next((run["modelId"] for run in runs if run["modelId"]), None)
    return {"agent": agent, "modelId": model, "runs": runs}


async def find_run(reader: HistoryReader, run_id: str, agent_id: str | None = None) -> Document:
    """The run with this id (of ``agent_id`` if given); not_found or ambiguous otherwise."""
    if agent_id:
        run = await reader.run(agent_id, run_id)
        if run is None:
            raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
        return run
    runs = await reader.runs_with_id(run_id)
    if not runs:
        raise not_found(f"no run {run_id!r}")
    if len(runs) > 1:
        agents = ", ".join(str(run["agentId"]) for run in runs)
        raise invalid_argument(f"run {run_id!r} belongs to several agents ({agents}); name one")
    return runs[0]


def is_live(run: Document) -> bool:
    """Whether more events may still arrive for this run."""
    return run.get("status") not in TERMINAL_RUN_STATUSES


async def transcript_page(
    reader: HistoryReader,
    agent_id: str,
    run_id: str,
    *,
    after: str | None = None,
    limit: int = DEFAULT_EVENTS_PAGE,
) -> Document:
    """One page of a run's transcript: the blocks of ``limit`` events after ``after``.

    ``next`` is the offset to read on from (the last event's, even at the end, so a
    live run is followed from there); ``more`` says whether stored events follow.
    """
    run = await reader.run(agent_id, run_id)
    if run is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    agent = await reader.agent(agent_id)
    page = await reader.events(run_id, after=after, limit=limit)
    transcript = TranscriptBuilder().extend(page.items)
    last = page.items[-1]["offset"] if page.items else after
    start = summarize_run(run).started_at
    live = is_live(run)
    return {
        "agent": agent,
        "run": run_summary(run),
        "live": live,
        # Block times are shown from here; a live run's duration so far, to the second.
        "start": start,
        "elapsedMs": now_ms() - start if live and start is not None else None,
        "after": after,
        "blocks": transcript.json(),
        "next": last,
        "more": page.next is not None,
        "usage": usage_counts(run.get("usage")) or transcript.usage,
    }
