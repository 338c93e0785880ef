"""The sample history: the team's stories as the documents and events a bridge stores.

:func:`sample_history` is deterministic given its seed and ``now``: ids, keys, token
counts and the moments between events come from one seeded random generator, and
every time is counted back from ``now`` (so the history is always "the past two
weeks"). Each agent gets the runs and events the bridge would have written (request,
status, prompt, thinking and text deltas, tool calls, task summary, usage, the final
status), one checkpoint blob, and the token name of its creator.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..lifecycle.items import AgentItem, BlobItem, EventsItem, Item, RunItem
from ..types import Document
from . import DEFAULT_SEED
from . import messages as m
from .script import Ending, Story, Tool, Turn
from .stories import STORIES

MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
#: Events per item written (the store's restore takes a page at a time).
EVENTS_PER_ITEM = 500
#: Words per streamed delta of assistant text or thinking.
WORDS_PER_DELTA = 2
BLOB_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SampleRun:
    document: Document
    events: list[Document]


@dataclass(frozen=True, slots=True)
class SampleAgent:
    """One agent of the sample: its story, document, runs, and its checkpoint blob."""

    story: Story
    document: Document
    runs: list[SampleRun]
    blob_id: str
    blob: bytes = field(repr=False)

    @property
    def agent_id(self) -> str:
        return str(self.document["agentId"])

    @property
    def tenant(self) -> str:
        return self.story.tenant

    def items(self) -> Iterator[Item]:
        """Its runs, their events, its blob, then the agent, as a walk gives them."""
        for sample in self.runs:
            run_id = sample.document["runId"]
            yield RunItem(self.tenant, sample.document, self.story.creator)
            for first in range(0, len(sample.events), EVENTS_PER_ITEM):
                page = sample.events[first : first + EVENTS_PER_ITEM]
                yield EventsItem(self.tenant, run_id, page)
        yield BlobItem(self.tenant, self.agent_id, self.blob_id, self._read_blob)
        yield AgentItem(self.tenant, self.document, self.story.creator)

    async def _read_blob(self) -> bytes:
        return self.blob


@dataclass(frozen=True, slots=True)
class SampleHistory:
    agents: tuple[SampleAgent, ...]

    def items(self) -> Iterator[Item]:
        for agent in self.agents:
            yield from agent.items()

    def agent(self, name: str) -> SampleAgent:
        """The agent of the story named ``name``."""
        (found,) = (agent for agent in self.agents if agent.story.name == name)
        return found

    @property
    def tenants(self) -> list[str]:
        return sorted({agent.tenant for agent in self.agents})

    @property
    def events(self) -> int:
        return sum(len(run.events) for agent in self.agents for run in agent.runs)


def sample_history(*, seed: int = DEFAULT_SEED, now_ms: int | None = None) -> SampleHistory:
    """The sample team's history, its last moment before ``now_ms`` (default: now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    rng = random.Random(seed)
    return SampleHistory(tuple(_Writer(rng).agent(story, now) for story in STORIES))


def deltas(text: str, words: int = WORDS_PER_DELTA) -> list[str]:
    """``text`` cut as a model streams it: a few words a piece, joined back exactly."""
    pieces = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)]


class _Writer:
    """Writes stories as a bridge would have stored them, drawing from one generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def agent(self, story: Story, now: int) -> SampleAgent:
        agent_id = f"agent-{self.uuid()}"
        created = now - int(story.days_ago * DAY_MS) + self.rng.randint(-20, 20) * MINUTE_MS
        clock = created + self.rng.randint(2_000, 9_000)
        runs: list[SampleRun] = []
        for number, turn in enumerate(story.turns, 1):
            if number > 1:
                clock += int(turn.after_hours * HOUR_MS) + self.rng.randint(0, 600_000)
            runs.append(self.run(story, agent_id, number, turn, clock))
            clock = runs[-1].document["endedAt"]
        blob = self.rng.randbytes(BLOB_BYTES)
        blob_id = hashlib.sha256(blob).hexdigest()
        last = story.turns[-1].ending
        document = {
            "agentId": agent_id,
            "cwd": story.cwd,
            "status": "archived" if story.archived else "error" if last is Ending.ERROR else "idle",
            "activeRunId": None,
            "name": story.name,
            "createdAt": created,
            "updatedAt": clock + self.rng.randint(5, 40),
            "latestCheckpoint": {"schemaVersion": 1, "rootBlobId": blob_id},
            "sdkMetadata": {"blobEncryptionKey": self.rng.randbytes(32).hex()},
        }
        return SampleAgent(story, document, runs, blob_id, blob)

    def run(
        self, story: Story, agent_id: str, turn_number: int, turn: Turn, created: int
    ) -> SampleRun:
        run_id, request_id = f"run-{self.uuid()}", self.uuid()
        started = created + self.rng.randint(150, 900)
        events = _Events(agent_id, run_id, started)
        events.add(m.request(request_id), 0)
        events.add(m.status(m.RUNNING), 4)
        events.add(m.user(turn.prompt), 12)
        answer = self.steps(events, turn)
        counts = self.usage(story, turn) if turn.ending is Ending.FINISHED else None
        if turn.ending is Ending.FINISHED:
            if turn.summary is not None:
                events.add(m.task(turn.summary), 30)
            assert counts is not None
            events.add(m.usage(counts), 15)
            events.add(m.status(m.FINISHED), 20)
        elif turn.ending is Ending.ERROR:
            events.add(m.status(m.ERROR, turn.error), self.rng.randint(800, 2500))
        else:
            events.add(m.status(m.CANCELLED), self.rng.randint(2_000, 6_000))
        ended = events.clock + self.rng.randint(5, 30)
        document = {
            "runId": run_id,
            "requestId": request_id,
            "agentId": agent_id,
            "turnNumber": turn_number,
            "status": turn.ending.value,
            "model": {"id": story.model},
            "result": answer if turn.ending is Ending.FINISHED else None,
            "error": turn.error,
            "usageRef": None,
            "usage": counts,
            "createdAt": created,
            "updatedAt": ended,
            "startedAt": started,
            "endedAt": ended,
            "startCheckpointRef": None,
            "latestCheckpointRef": None,
        }
        return SampleRun(document, events.stored)

    def steps(self, events: _Events, turn: Turn) -> str | None:
        """Stream the turn's thinking and steps; its last text (the answer)."""
        rng = self.rng
        if turn.thinking:
            thought = events.clock
            for piece in deltas(turn.thinking, 3):
                events.add(m.thinking(piece), rng.randint(40, 120))
            events.add(m.thinking_done(events.clock - thought + 200), 10)
        answer: str | None = None
        for step in turn.steps:
            if isinstance(step, Tool):
                call_id = f"call_{rng.getrandbits(96):024x}"
                events.add(m.tool_use(call_id, step.name, step.args), rng.randint(20, 80))
                events.add(m.tool_call(call_id, step.name, m.CALL_RUNNING, step.args), 15)
                state = m.CALL_ERROR if step.failed else m.CALL_COMPLETED
                took = (
                    rng.randint(1_500, 9_000)
                    if step.name == "run_terminal_cmd"
                    else rng.randint(40, 400)
                )
                events.add(m.tool_call(call_id, step.name, state, step.args, step.result), took)
            else:
                for piece in deltas(step):
                    events.add(m.assistant(piece), rng.randint(25, 90))
                answer = step
        return answer

    def usage(self, story: Story, turn: Turn) -> Document:
        rng = self.rng
        written = sum(len(step if isinstance(step, str) else step.result) for step in turn.steps)
        calls = sum(isinstance(step, Tool) for step in turn.steps)
        input_tokens = 2_400 + len(turn.prompt) // 4 + calls * rng.randint(700, 1_300)
        counts = {
            "inputTokens": input_tokens,
            "outputTokens": written // 4 + rng.randint(50, 400),
            # Each step reads the conversation so far again, most of it from the cache.
            "cacheReadTokens": input_tokens * rng.randint(40, 85) // 100 * min(1 + calls // 4, 8),
            "cacheWriteTokens": rng.randint(0, 900),
        }
        counts["totalTokens"] = sum(counts.values())
        if story.model != "composer-2":
            counts["reasoningTokens"] = len(turn.thinking) // 3 + rng.randint(100, 900)
        return counts


class _Events:
    """A run's stored events, numbered from 1 and stamped as they stream."""

    def __init__(self, agent_id: str, run_id: str, started: int) -> None:
        self.agent_id, self.run_id, self.clock = agent_id, run_id, started
        self.stored: list[Document] = []

    def add(self, message: Document, after_ms: int) -> None:
        self.clock += after_ms
        seq = len(self.stored) + 1
        self.stored.append(m.stored_event(self.agent_id, self.run_id, seq, self.clock, message))
