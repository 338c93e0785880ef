"""The viewer's exports: a run or an agent as JSON lines, a run whole for Markdown.

Each checks what it names before it streams, so a missing run is a 404, not a
half-written download.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..errors import not_found
from ..types import Document
from .agent_rows import display_name
from .pages import Context
from .reader import HistoryReader
from .transcript import TranscriptBuilder, usage_counts


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
    agent = await context.reader.agent(agent_id)
    if agent is not None:
        first = await context.reader.runs(agent_id, cursor=None, limit=1)
        first_run = first.items[0]["runId"] if first.items else None
        agent = {**agent, "displayName": await display_name(context.reader, agent, first_run)}
    [run] = await context.activity.with_run_creators([found])
    return {
        "agent": agent,
        "run": run,
        "blocks": builder.json(),
        "usage": usage_counts(found.get("usage")) or builder.usage,
    }
