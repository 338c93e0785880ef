"""How big a page of search results may be, what a hit carries, and where the next
page goes on.

A page holds at most :data:`HITS_PER_PAGE` hits and :data:`MAX_PAGE_BYTES` of them as
JSON. A hit names its agent by id and a cut name (never the agent's document, which
may be large), its run by id, turn and a cut status, and shows a snippet; a tool
call's key (its call id, any length) only if short. So one agent with thousands of
matching runs is many pages, not one answer of hundreds of megabytes.

A run's hits (at most three) go on one page, so a page ends between runs, between an
agent's name and its first run, or between agents; its cursor says which:

- the agents list's own cursor: go on with the agents after that one (what search
  cursors were before, so those still work);
- a search cursor: go on inside one agent, after one of its runs (or before its
  first), then with the agents after it. It holds the agent's place in list order
  (as the agents cursor says it), its id, and the run's place (turn, id).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backend.sort_keys import sort_integer
from ..backend.substores import AgentPosition, agent_position
from ..errors import ConnectError, invalid_argument
from ..rpc.contract import agent_cursor, parse_agent_cursor
from ..types import Document
from ..wire import jsontext
from ..wire.cursors import cursor_id, cursor_integer, decode_cursor, encode_cursor
from ..wire.fields import MAX_SAFE_INTEGER

HITS_PER_PAGE = 50
MAX_PAGE_BYTES = 256 * 1024
#: What of a page its hits may fill: the rest is for the query, the cursors and the
#: page's other fields.
HIT_BYTES = MAX_PAGE_BYTES - 8 * 1024
#: An agent's name in a hit is cut to this; the name hit's snippet shows the match.
NAME_CHARS = 160
STATUS_CHARS = 40
#: A block key longer than this (a tool call's id) is left out of a hit: its link goes
#: to the block's page of events, not to the block itself.
KEY_CHARS = 200
_KIND = "search"
#: After a run whose turn no cursor can say (text or beyond 2^53 in a store written
#: before imports were checked): such runs sort last.
_LAST_TURN = MAX_SAFE_INTEGER + 1


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def agent_ref(agent: Document) -> Document:
    """What a hit says of its agent: its id and its name, cut."""
    name = agent.get("name")
    return {
        "agentId": agent["agentId"],
        "name": cut(name, NAME_CHARS) if isinstance(name, str) else None,
    }


def run_ref(run: Document) -> Document:
    status = run.get("status")
    return {
        "runId": run["runId"],
        "agentId": run["agentId"],
        "turnNumber": run.get("turnNumber"),
        "status": cut(status, STATUS_CHARS) if isinstance(status, str) else None,
    }


def shown_key(key: str) -> str | None:
    return key if len(key) <= KEY_CHARS else None


def run_place(run: Document) -> tuple[int, str]:
    """Where a run sorts among its agent's runs (turn, then id), as a cursor says it."""
    turn = sort_integer(run.get("turnNumber"), ascending=True, bound=MAX_SAFE_INTEGER)
    return (_LAST_TURN if turn is None else turn, str(run["runId"]))


@dataclass(frozen=True, slots=True)
class Inside:
    """Go on inside agent ``agent_id`` after the run at ``after`` (None: before its
    first run). ``at`` is the agent's place as its agents cursor says it (None: no
    cursor goes past it; nothing is searched after it)."""

    agent_id: str
    at: int | None
    after: tuple[int, str] | None

    def holds(self, agent: Document) -> bool:
        """Whether ``agent`` is still where the cursor left it."""
        return agent["agentId"] == self.agent_id and _at(agent) == self.at

    def position(self) -> AgentPosition | None:
        """The agents list's position after the agent; None: none comes after it."""
        return None if self.at is None else AgentPosition(self.at, self.agent_id)

    def before(self) -> AgentPosition | None:
        """A position right before the agent in list order (``updatedAt``, then
        ``agentId`` descending; an id holds no NUL, so none sorts between it and itself
        followed by U+0001)."""
        return None if self.at is None else AgentPosition(self.at, self.agent_id + "\x01")

    def runs_after(self, runs: list[Document]) -> list[Document]:
        return [run for run in runs if self.after is None or run_place(run) > self.after]


@dataclass(frozen=True, slots=True)
class Start:
    """Where a page starts: inside an agent, then (or else) with the agents after
    ``after`` (None: from the newest; ``ended``: nothing comes after)."""

    inside: Inside | None = None
    after: AgentPosition | None = None
    ended: bool = False


def _at(agent: Document) -> int | None:
    return sort_integer(agent.get("updatedAt"), ascending=False, bound=MAX_SAFE_INTEGER)


def inside_cursor(agent: Document, last: Document | None) -> str:
    """Go on inside ``agent`` after its run ``last`` (None: before its first run)."""
    at = _at(agent)
    turn, run_id = run_place(last) if last is not None else ("", "")
    return encode_cursor(_KIND, "" if at is None else at, agent["agentId"], turn, run_id)


def after_cursor(agent: Document) -> str | None:
    """Go on with the agents after ``agent``; None if none can come after it."""
    return agent_cursor(agent_position(agent))


def parse_search_cursor(cursor: str | None) -> Start:
    """Where a page with this cursor starts; ``invalid_argument`` for a forged one."""
    if not cursor:
        return Start()
    field = "search"
    try:
        at, agent_id, turn, run_id = decode_cursor(cursor, _KIND, field, 4)
    except ConnectError:
        # Not a search cursor: the agents list's own, or refused as it is.
        return Start(after=parse_agent_cursor({"cursor": cursor}, field))
    if (turn == "") != (run_id == ""):
        raise invalid_argument(f"{field}.cursor is not a cursor this store issued")
    inside = Inside(
        agent_id=cursor_id(agent_id, field),
        at=None if at == "" else cursor_integer(at, field),
        after=None if turn == "" else (_turn(turn, field), cursor_id(run_id, field)),
    )
    position = inside.position()
    return Start(inside=inside, after=position, ended=position is None)


def _turn(text: str, field: str) -> int:
    if text == str(_LAST_TURN):
        return _LAST_TURN
    return cursor_integer(text, field)


@dataclass
class PageFill:
    """The hits of a page as they are found, within its bounds."""

    limit: int = HITS_PER_PAGE
    hits: list[Document] = field(default_factory=list)
    size: int = 2

    def add(self, hits: list[Document]) -> bool:
        """Add one run's (or name's) hits if the page holds them; whether it did. An
        empty page takes them whatever their size, so every page moves on."""
        if not hits:
            return True
        sizes = sum(len(jsontext.dumps(hit)) + 1 for hit in hits)
        if self.hits and (len(self.hits) + len(hits) > self.limit or self.size + sizes > HIT_BYTES):
            return False
        self.hits.extend(hits)
        self.size += sizes
        return True
