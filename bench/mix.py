"""The CallStore operation mix of ``python -m bench load``, derived from recorded bridge traffic.

Request shapes come from ``bench/data/bridge-traffic.jsonl`` (a copy of the traffic the
real ``cursor-sdk-bridge`` sent through one agent life cycle): the agent and run
documents, the three ``runEvents.append`` envelopes of a turn, the list filters the
SDK sends. Checkpoint calls are absent from that recording (its turns end before any
checkpoint is written), so their shapes follow the contract: ``{agentId, blobId,
data}`` with a 4 KiB blob, base64. The weights are a model of a streaming turn, not
a count of the recording; docs/benchmarks.md says how they were chosen.

Each :class:`Operation` is a JSON body with ``{{HOLE}}`` holes. A hole is filled from
a seeded record of the operation's pool (``AGENT``, ``RUN``, ``BLOB`` ...) or from a
per-request value: ``NOW`` (a timestamp that moves), ``UNIQUE`` (a fresh 64-hex blob
id) and ``AFTER`` (the offset an observer polls after: a few events behind what this
load generator has appended to the run). :func:`render` fills holes in Python (seed,
pre-flight, tests); ``bench/loadgen.py`` compiles the same templates to wrk's Lua.
The templates are made from the recording in ``bench/mix_recording.py``.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.mix_recording import (
    RECORDING,
    Recorded,
    Template,
    random_blob,
    read_recording,
    templates_of,
)

#: Text that needs no escape inside a JSON string: wrk's Lua writes record values as is.
SAFE_TEXT = re.compile(r'[^"\\\x00-\x1f]*')
#: Holes filled per request rather than from a seeded record.
DYNAMIC_HOLES = frozenset({"NOW", "UNIQUE", "AFTER"})

#: Seeded world (the same on every target): agents, their finished runs, blobs.
AGENTS = 32
FINISHED_RUNS_PER_AGENT = 2
BLOBS = 16
#: Events already in each active run before load starts.
SEEDED_EVENTS = 10
#: How far behind the newest appended event an observer's poll starts.
POLL_BEHIND = 3
#: Two directories, so ``agents.list`` with a ``cwd`` filter selects half the agents.
CWDS = ("/home/user/project", "/home/user/service")
#: First timestamp of the seeded world and base of ``NOW`` (ms since the epoch).
BASE_MS = 1_795_994_234_137
#: Phases of one target's run. Each has its own active runs, so warm-up appends never
#: shift the offsets the timed phase polls, and each run's log can be checked after.
#: "open" is the fixed-rate run (bench/openloop.py).
PHASES = ("preflight", "warmup", "timed", "open")

#: (operation name, variant, pool, weight) of the realistic mix; weights sum to 100.
REALISTIC: tuple[tuple[str, str, str, int], ...] = (
    ("runEvents.append", "request", "active", 10),
    ("runEvents.append", "status", "active", 10),
    ("runEvents.append", "status-error", "active", 10),
    ("runEvents.append", "message-1k", "active", 15),
    ("runEvents.append", "message-4k", "active", 5),
    ("runEvents.list", "poll", "active", 12),
    ("agents.get", "", "agents", 12),
    ("runs.get", "", "active", 6),
    ("runs.update", "", "active", 6),
    ("agents.update", "", "agents", 4),
    ("agents.list", "first-page", "agents", 1),
    ("agents.list", "cwd", "agents", 1),
    ("runs.list", "", "agents", 2),
    ("checkpoints.get", "", "blobs", 3),
    ("checkpoints.create", "", "blobs", 3),
)
#: ``--mix`` names besides the operation names themselves.
ALIASES = {"append": "runEvents.append", "poll": "runEvents.list"}
#: The realistic mix with every ``runs.update`` ending its run (``finished``): what
#: ``serve --export-runs`` sends runs on, at 6% of the calls, more runs ended than
#: real turns end (one update in two). ``python -m bench export-runs`` runs it.
ENDING = "ending"


@dataclass(frozen=True)
class Operation:
    """One kind of request of the mix: a weighted, templated CallStore call."""

    name: str  # "substore.method"
    variant: str
    pool: str  # "agents", "active" or "blobs": whose records fill its holes
    weight: int
    template: Template

    @property
    def key(self) -> str:
        return f"{self.name}:{self.variant}" if self.variant else self.name

    @property
    def substore(self) -> str:
        return self.name.split(".")[0]

    @property
    def method(self) -> str:
        return self.name.split(".")[1]

    @property
    def appends(self) -> bool:
        return self.name == "runEvents.append"


Record = dict[str, str]


@dataclass
class World:
    """What every target holds before load: seed calls and the records holes draw from."""

    agents: list[Record] = field(default_factory=list)
    blobs: list[Record] = field(default_factory=list)
    #: Active (streaming) runs per phase; appends, polls, runs.get/update hit these.
    active: dict[str, list[Record]] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    #: Base64 of each seeded blob, by blob id: checkpoints.get must return it.
    blob_data: dict[str, str] = field(default_factory=dict)

    def pool(self, name: str, phase: str) -> list[Record]:
        return self.active[phase] if name == "active" else getattr(self, name)


def operations(mix: str = "realistic", path: Path = RECORDING) -> list[Operation]:
    """The weighted operations of ``mix``: "realistic", "ending", an operation name, or
    an alias."""
    templates = templates_of(read_recording(path))
    chosen = ALIASES.get(mix, mix)
    selected = [spec for spec in REALISTIC if chosen in ("realistic", ENDING, spec[0])]
    if not selected:
        raise ValueError(f"unknown mix {mix!r}; one of: {', '.join(mix_names())}")
    if chosen == ENDING:
        selected = [
            (name, "ended" if name == "runs.update" else variant, pool, weight)
            for name, variant, pool, weight in selected
        ]
    return [
        Operation(name, variant, pool, weight, templates[f"{name}:{variant}" if variant else name])
        for name, variant, pool, weight in selected
    ]


def mix_names() -> list[str]:
    names = ["realistic", ENDING, *ALIASES]
    for name, *_ in REALISTIC:
        if name not in names:
            names.append(name)
    return names


def schedule(ops: Sequence[Operation], seed: int = 7) -> list[int]:
    """Operation indexes in a shuffled cycle whose counts are exactly the weights.

    A fixed cycle rather than a random draw per request: every run of every target
    sends the same sequence, so their differences are the servers', not the dice's.
    """
    order = [index for index, op in enumerate(ops) for _ in range(op.weight)]
    random.Random(seed).shuffle(order)
    return order


# -- the seeded world --------------------------------------------------------------


def _id(rng: random.Random, prefix: str) -> str:
    return f"{prefix}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def build_world(active_runs: int, path: Path = RECORDING, seed: int = 1) -> World:
    """The seeded world, with ``active_runs`` streaming runs for each load phase."""
    recorded = read_recording(path)
    templates = templates_of(recorded)
    rng = random.Random(seed)
    world = World()
    turns: dict[str, int] = {}
    for index in range(AGENTS):
        agent_id = _id(rng, "agent")
        created = BASE_MS + index * 1000
        document = {
            **recorded.agent,
            "agentId": agent_id,
            "cwd": CWDS[index % len(CWDS)],
            "name": f"agent {index}",
            "createdAt": created,
            "updatedAt": created,
            "sdkMetadata": {"blobEncryptionKey": rng.randbytes(32).hex()},
        }
        runs = []
        for turn in range(1, FINISHED_RUNS_PER_AGENT + 1):
            run = {
                **recorded.run,
                "runId": _id(rng, "run"),
                "agentId": agent_id,
                "requestId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "turnNumber": turn,
                "status": "finished",
                "createdAt": created + turn,
                "updatedAt": created + turn,
                "startedAt": created + turn,
                "endedAt": created + turn + 500,
            }
            runs.append(run)
        document["activeRunId"] = None
        world.calls.append(("agents", "create", {"agent": document}))
        world.calls += [("runs", "create", {"run": run}) for run in runs]
        turns[agent_id] = FINISHED_RUNS_PER_AGENT
        world.agents.append(
            {
                "AGENT": agent_id,
                "CWD": document["cwd"],
                "NAME": document["name"],
                "CREATED": str(created),
                "KEY": document["sdkMetadata"]["blobEncryptionKey"],
                "RUN": runs[-1]["runId"],
            }
        )
    for phase in PHASES:
        count = 1 if phase == "preflight" else active_runs
        world.active[phase] = [
            _active_run(world, recorded, templates, rng, turns, len(world.calls) + i)
            for i in range(count)
        ]
    for index in range(BLOBS):
        agent = world.agents[index % AGENTS]
        blob_id, data = random_blob(rng)
        world.blob_data[blob_id] = data
        world.calls.append(
            ("checkpoints", "create", {"agentId": agent["AGENT"], "blobId": blob_id, "data": data})
        )
        world.blobs.append({"AGENT": agent["AGENT"], "BLOB": blob_id})
    return world


def _active_run(
    world: World,
    recorded: Recorded,
    templates: Mapping[str, Template],
    rng: random.Random,
    turns: dict[str, int],
    ordinal: int,
) -> Record:
    agent = world.agents[ordinal % AGENTS]
    agent_id = agent["AGENT"]
    turns[agent_id] += 1
    created = int(agent["CREATED"]) + 100 * turns[agent_id]
    record = {
        "RUN": _id(rng, "run"),
        "AGENT": agent_id,
        "CWD": agent["CWD"],
        "REQUEST": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "TURN": str(turns[agent_id]),
        "CREATED": str(created),
        "SEEDED": str(SEEDED_EVENTS),
    }
    run = {
        **recorded.run,
        "runId": record["RUN"],
        "agentId": agent_id,
        "requestId": record["REQUEST"],
        "turnNumber": turns[agent_id],
        "status": "running",
        "createdAt": created,
        "updatedAt": created,
        "startedAt": created,
    }
    world.calls.append(("runs", "create", {"run": run}))
    small = ("request", "status", "status-error")
    for seq in range(SEEDED_EVENTS):
        text = templates[f"runEvents.append:{small[seq % len(small)]}"].render(record)
        world.calls.append(("runEvents", "append", json.loads(text)["input"]))
    return record


# -- rendering and checking --------------------------------------------------------


def dynamic_values(
    record: Mapping[str, str], counter: int, thread: int, tag: str, appended: int
) -> dict[str, str]:
    """The per-request holes, exactly as the Lua script computes them.

    ``counter`` is the thread's request number (from 1), ``tag`` 8 hex digits of the
    phase, ``appended`` how many appends this generator sent to the record's run.
    """
    values = {
        "NOW": str(BASE_MS + 1_000_000 + counter),
        "UNIQUE": f"{tag}{thread:02x}{counter:054x}",
    }
    if "SEEDED" in record:
        values["AFTER"] = str(max(0, int(record["SEEDED"]) + appended - POLL_BEHIND))
    return values


def render(
    op: Operation, record: Mapping[str, str], counter: int = 1, tag: str = "0" * 8
) -> dict[str, Any]:
    """One request of ``op`` as a CallStore message, holes filled from ``record``."""
    values = {**record, **dynamic_values(record, counter, 0, tag, 0)}
    message: dict[str, Any] = json.loads(op.template.render(values))
    return message


def check_output(op: Operation, record: Mapping[str, str], world: World, output: Any) -> str | None:
    """Why ``output`` is not a correct answer to ``op`` on ``record``; None when it is."""
    problems = list(_problems(op, record, world, output))
    return "; ".join(problems) if problems else None


def _problems(op: Operation, record: Mapping[str, str], world: World, output: Any) -> Iterator[str]:
    expect_document = op.method in ("get", "update", "append") and op.substore != "checkpoints"
    if expect_document and not isinstance(output, dict):
        yield f"expected a document, got {output!r:.200}"
        return
    if op.name == "runEvents.append":
        if output.get("runId") != record["RUN"]:
            yield "appended to another run"
        seq = output.get("seq")
        if not isinstance(seq, int) or seq <= int(record["SEEDED"]):
            yield f"seq {seq!r} does not follow the seeded events"
        elif output.get("offset") != str(seq):
            yield f"offset {output.get('offset')!r} is not the decimal seq"
    elif op.name in ("agents.get", "agents.update"):
        if output.get("agentId") != record["AGENT"]:
            yield "another agent"
        if output.get("cwd") != record["CWD"]:
            yield "cwd changed"
    elif op.name in ("runs.get", "runs.update"):
        if (output.get("runId"), output.get("agentId")) != (record["RUN"], record["AGENT"]):
            yield "another run"
    elif op.name.endswith(".list"):
        items = output.get("items") if isinstance(output, dict) else None
        if not isinstance(items, list) or not items:
            yield f"expected a non-empty page, got {output!r:.200}"
            return
        if op.name == "runEvents.list":
            after = int(record["SEEDED"]) - POLL_BEHIND
            seqs = [item.get("seq") for item in items]
            if seqs != list(range(after + 1, after + 1 + len(seqs))):
                yield f"events {seqs} do not follow offset {after}"
        elif op.name == "agents.list":
            if any(item.get("cwd") != record["CWD"] for item in items):
                yield "an agent of another cwd"
        elif op.name == "runs.list" and any(
            item.get("agentId") != record["AGENT"] for item in items
        ):
            yield "a run of another agent"
    elif op.name == "checkpoints.get":
        if output != {"found": True, "data": world.blob_data[record["BLOB"]]}:
            yield f"expected the seeded blob, got {output!r:.200}"
    elif op.name == "checkpoints.create" and output is not None:
        yield f"expected a null result, got {output!r:.200}"
