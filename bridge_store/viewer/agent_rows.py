"""The agents list's rows: a name a person recognises, and how each agent's runs went.

The SDK names every agent it is not given a name for "New Agent", so a list of them
says nothing; such an agent is shown by its first prompt instead (the first user
text of its first run). Each row also carries its last run's status (and tokens) and
the tokens of all its runs, and its activity: its runs on each of the last
:data:`ACTIVITY_DAYS` UTC days, drawn as a sparkline. An agent's runs are read whole,
as the agent page reads them (an agent has few runs next to its events); the prompt
costs one read of the first run's first events, and only for agents without a name
of their own.
"""

from __future__ import annotations

import time

from ..backend.history import summarize_run
from ..backend.statistics import DAY_MS
from ..types import Document
from ..workspaces.paths import parse_key
from ..workspaces.translate import WORKED_IN
from .reader import HistoryReader
from .transcript import Text, TranscriptBuilder

#: The name the SDK gives an agent created without one.
DEFAULT_AGENT_NAME = "New Agent"
#: Events of the first run read for its prompt: the prompt comes right after the
#: request and the first status changes.
PROMPT_EVENTS = 50
#: A prompt shown as a name is cut to this many characters.
NAME_CHARS = 80
#: The days of an agent's activity sparkline, today the last.
ACTIVITY_DAYS = 14


def has_own_name(agent: Document) -> bool:
    name = agent.get("name")
    return isinstance(name, str) and name.strip() not in ("", DEFAULT_AGENT_NAME)


def shortened(text: str, limit: int = NAME_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


async def first_prompt(reader: HistoryReader, run_id: str) -> str | None:
    """The first user text of a run, from its first events; None if there is none."""
    page = await reader.events(run_id, after=None, limit=PROMPT_EVENTS)
    for block in TranscriptBuilder().extend(page.items).blocks:
        if isinstance(block, Text) and block.kind == "user" and block.text.strip():
            return shortened(block.text)
    return None


async def display_name(reader: HistoryReader, agent: Document, first_run: str | None) -> str:
    """The agent's own name, else its first prompt, else whatever it is called."""
    if has_own_name(agent):
        return str(agent["name"])
    prompt = await first_prompt(reader, first_run) if first_run is not None else None
    return prompt or str(agent.get("name") or agent["agentId"])


def activity(runs: list[Document], today: int) -> list[int]:
    """Runs started on each of the :data:`ACTIVITY_DAYS` days ending ``today``, oldest first."""
    first = today - ACTIVITY_DAYS + 1
    counts = [0] * ACTIVITY_DAYS
    for run in runs:
        started = summarize_run(run).started_at
        day = (started if started is not None else 0) // DAY_MS
        if first <= day <= today:
            counts[day - first] += 1
    return counts


async def agent_rows(reader: HistoryReader, agents: list[Document]) -> list[Document]:
    """Each agent with ``displayName``, ``lastRun``, ``totalTokens`` (of all runs) and
    ``activity`` (its runs a day over the last days)."""
    today = time.time_ns() // 1_000_000 // DAY_MS
    rows = []
    for agent in agents:
        runs = await reader.all_runs(agent["agentId"])
        totals = [summarize_run(run).total_tokens for run in runs]
        reported = [total for total in totals if total is not None]
        last = runs[-1] if runs else None
        rows.append(
            {
                **agent,
                "displayName": await display_name(
                    reader, agent, runs[0]["runId"] if runs else None
                ),
                "runCount": len(runs),
                "lastRun": None
                if last is None
                else {
                    "runId": last["runId"],
                    "turnNumber": last.get("turnNumber"),
                    "status": last.get("status"),
                    "totalTokens": totals[-1],
                },
                "totalTokens": sum(reported) if reported else None,
                "activity": activity(runs, today),
                "workspace": workspace_cell(agent),
            }
        )
    return rows


def workspace_cell(agent: Document) -> Document | None:
    """The workspace an agent is kept against (None: it keeps its path): the id, the
    directory inside the repository and the path it was last worked in."""
    cwd = agent.get("cwd")
    parsed = parse_key(cwd) if isinstance(cwd, str) else None
    if parsed is None:
        return None
    worked_in = agent.get(WORKED_IN)
    return {
        "id": parsed[0],
        "directory": parsed[1],
        "workedIn": worked_in if isinstance(worked_in, str) else None,
    }
