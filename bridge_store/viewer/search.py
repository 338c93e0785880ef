"""Full-text search over agent names and the user and assistant text of runs.

What a query means, on every backend: every word of it, case-insensitively, at the
start of a word of an agent's name or of one block of a run's user or assistant text
(consecutive deltas joined, as the transcript shows them). ``log`` finds "login" and
"the log", not "catalog".

Two ways to answer, behind one seam (:class:`Searcher`, what the pages use):

- :class:`IndexedSearch`, where the backend has a full-text index (SQL: SQLite FTS5,
  Postgres ``tsvector``): the index names, for the caller's tenant, the agents and runs
  that can match, a page of agents at a time; their runs are then read and matched
  exactly as a scan would, so both find the same hits, only the index skips the rest.
- :class:`ScanSearch` everywhere else (memory, Redis, S3): the history is read through
  the viewer's :class:`~bridge_store.viewer.reader.HistoryReader` like any page, a
  bounded slice at a time: each page covers at most :data:`SCAN_AGENTS_PER_PAGE`
  agents, newest first, with all their runs.

Either way a page is bounded in hits and bytes, and its cursor may stop inside an
agent's runs (:mod:`.search_pages`).

Both read through a reader made for the caller, so both see the caller's tenant only;
the index is also asked for that tenant alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from ..backend.features import SearchIndex
from ..backend.statistics import UNNAMED_TOOL
from ..backend.substores import AgentPosition, agent_position
from ..rpc.contract import agent_cursor
from ..stack.stores import Stores
from ..types import Document
from .reader import HistoryReader
from .search_pages import (
    HITS_PER_PAGE,
    Inside,
    PageFill,
    agent_ref,
    inside_cursor,
    parse_search_cursor,
    run_ref,
    shown_key,
)
from .transcript import Block, Status, Text, ToolCall, TranscriptBuilder, compact_json

SCAN_AGENTS_PER_PAGE = 20
#: A run contributes at most this many matching blocks; the transcript shows the rest.
HITS_PER_RUN = 3
SNIPPET_CHARS = 160
MAX_QUERY_CHARS = 200
SEARCHED_KINDS = ("user", "assistant")
#: Up to this many runs of an agent are read one by one, more with one list.
FEW_RUNS = 2
#: How much of each word an index looks up (see :func:`index_terms`): a word split
#: between streamed deltas is found when its first piece has this many characters.
INDEX_PREFIX_CHARS = 3
#: An index is asked about this many terms at most (more only narrow a little further).
MAX_INDEX_TERMS = 8
_ASCII_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Matches and where to go on: ``next`` is None once the whole history was searched."""

    query: str
    hits: list[Document]
    next: str | None
    #: "index" or "scan": how this page was answered (the page says so).
    method: str

    def to_json(self) -> Document:
        return {"query": self.query, "hits": self.hits, "next": self.next, "method": self.method}


class Searcher(Protocol):
    """Answers a search for one caller: the words (lowercased, at least one), a page."""

    async def search_history(
        self, words: list[str], *, cursor: str | None, limit: int
    ) -> SearchPage: ...


def words_of(query: str) -> list[str]:
    return query[:MAX_QUERY_CHARS].casefold().split()


def _found(folded: str, word: str) -> bool:
    """Whether ``word`` starts a word of ``folded`` (or, starting with punctuation, is in it)."""
    at = folded.find(word)
    while at != -1:
        if at == 0 or not word[0].isalnum() or not folded[at - 1].isalnum():
            return True
        at = folded.find(word, at + 1)
    return False


def matches(text: str, words: list[str]) -> bool:
    folded = text.casefold()
    return all(_found(folded, word) for word in words)


def index_terms(words: list[str]) -> list[str]:
    """The prefixes an index can look up for ``words``: the first
    :data:`INDEX_PREFIX_CHARS` characters of their runs of ASCII letters and digits that
    start a word of any text the word matches.

    A run that follows a non-ASCII character is left out: whether that character is a
    letter (so the run sits inside an indexed word) depends on the database's locale.
    A run that ends at one is kept: it is a prefix of the indexed word either way. Only
    a run's start is looked up because the index reads events one by one, and a
    streamed answer can split a word between two deltas ("zanzi", "bar"): the start
    is still found in the first.
    """
    terms: list[str] = []
    for word in words:
        for found in _ASCII_WORD.finditer(word):
            start = found.start()
            if start == 0 or (word[start - 1].isascii() and not word[start - 1].isalnum()):
                terms.append(found.group()[:INDEX_PREFIX_CHARS])
    return list(dict.fromkeys(terms))[:MAX_INDEX_TERMS]


def snippet(text: str, words: list[str]) -> str:
    """A short piece of ``text`` around the first word found."""
    at = text.casefold().find(words[0]) if words else 0
    start = max(0, at - SNIPPET_CHARS // 3)
    piece = text[start : start + SNIPPET_CHARS].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def name_hit(agent: Document, words: list[str]) -> list[Document]:
    name = agent.get("name")
    if isinstance(name, str) and matches(name, words):
        return [{"kind": "agent", "agent": agent_ref(agent), "text": snippet(name, words)}]
    return []


def searched_text(block: Block) -> str | None:
    """What search reads of a block: a prompt's or answer's text; a tool call's name,
    arguments and result (strings as they are, anything else as compact JSON); a
    status's text (an error's message). None for every other block."""
    if isinstance(block, Text):
        return block.text if block.kind in SEARCHED_KINDS else None
    if isinstance(block, ToolCall):
        # A call no event named is shown as "tool": no event says so, so it is not read.
        name = [block.name] if block.name != UNNAMED_TOOL else []
        given = [_as_text(value) for value in (block.args, block.result) if value is not None]
        return " ".join([*name, *given])
    if isinstance(block, Status):
        return block.message or None
    return None


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else compact_json(value)


async def run_hits(
    reader: HistoryReader, agent: Document, run: Document, words: list[str]
) -> list[Document]:
    """The blocks of one run whose searched text (:func:`searched_text`) holds every
    word, at most :data:`HITS_PER_RUN`, each as a bounded hit (:mod:`.search_pages`)."""
    builder = TranscriptBuilder()
    async for event in reader.all_events(run["runId"]):
        builder.add(event)
    hits: list[Document] = []
    for block in builder.blocks:
        text = searched_text(block)
        if text is not None and matches(text, words):
            hits.append(
                {
                    "kind": block.kind,
                    "agent": agent_ref(agent),
                    "run": run_ref(run),
                    "seq": block.seqs[0],
                    "key": shown_key(block.key),
                    "text": snippet(text, words),
                }
            )
            if len(hits) == HITS_PER_RUN:
                break
    return hits


#: Agents in list order: each one's place, the agent (None: deleted since an index
#: named it) and the runs an index named (None: every run).
Slice = tuple[list[tuple[AgentPosition, Document | None, list[str] | None]], bool]


class _History(Protocol):
    """What a page of search reads, by scan or through an index."""

    @property
    def reader(self) -> HistoryReader: ...

    async def rest_of(
        self, inside: Inside, words: list[str]
    ) -> tuple[Document, list[Document]] | None:
        """The agent a cursor stopped inside and its runs left to search; None if it is
        gone or no longer where it was (the list goes on after its place)."""
        ...

    async def agents_after(self, after: AgentPosition | None, words: list[str]) -> Slice:
        """A slice of agents after ``after`` that may match, and whether more follow."""
        ...

    async def runs_of(self, agent: Document, named: list[str] | None) -> list[Document]:
        """An agent's runs to search, by turn (``named``: those an index named)."""
        ...


async def _search_page(
    history: _History, words: list[str], cursor: str | None, limit: int, method: str
) -> SearchPage:
    """One bounded page: the rest of the agent the cursor stopped inside, then agent by
    agent (its name, then its runs by turn) until the slice ends or the page is full."""
    start = parse_search_cursor(cursor)
    fill = PageFill(limit)
    query = " ".join(words)
    inside = start.inside
    rest = await history.rest_of(inside, words) if inside is not None else None
    if rest is not None:
        stopped, last = await _fill_runs(history.reader, fill, *rest, words)
        if stopped:
            return SearchPage(query, fill.hits, inside_cursor(rest[0], last), method)
    if start.ended:
        return SearchPage(query, fill.hits, None, method)
    # The cursor that starts the next page at the agent about to be searched.
    here = cursor if inside is None else agent_cursor(start.after) if start.after else None
    slice_, more = await history.agents_after(start.after, words)
    for position, agent, named in slice_:
        if agent is not None:
            if not fill.add(name_hit(agent, words)):
                return SearchPage(query, fill.hits, here, method)
            runs = await history.runs_of(agent, named)
            stopped, last = await _fill_runs(history.reader, fill, agent, runs, words)
            if stopped:
                return SearchPage(query, fill.hits, inside_cursor(agent, last), method)
        here = agent_cursor(position)
        if here is None:
            return SearchPage(query, fill.hits, None, method)
    return SearchPage(query, fill.hits, here if more else None, method)


async def _fill_runs(
    reader: HistoryReader, fill: PageFill, agent: Document, runs: list[Document], words: list[str]
) -> tuple[bool, Document | None]:
    """Each run's hits onto the page while it holds them: whether it filled first, and
    the last run whose hits it took (None: none of these runs)."""
    last: Document | None = None
    for run in runs:
        if not fill.add(await run_hits(reader, agent, run, words)):
            return True, last
        last = run
    return False, last


@dataclass(frozen=True, slots=True)
class ScanSearch:
    """Search by reading: agent names, then each run's user and assistant text."""

    reader: HistoryReader
    agents_per_page: int = SCAN_AGENTS_PER_PAGE

    async def search_history(
        self, words: list[str], *, cursor: str | None, limit: int
    ) -> SearchPage:
        return await _search_page(self, words, cursor, limit, "scan")

    async def rest_of(
        self, inside: Inside, words: list[str]
    ) -> tuple[Document, list[Document]] | None:
        agent = await self.reader.agent(inside.agent_id)
        if agent is None or not inside.holds(agent):
            return None
        return agent, inside.runs_after(await self.reader.all_runs(inside.agent_id))

    async def agents_after(self, after: AgentPosition | None, words: list[str]) -> Slice:
        # A slice is a number of agents read, not of hits: each costs reading its runs.
        cursor = agent_cursor(after) if after is not None else None
        page = await self.reader.agents(cwd=None, cursor=cursor, limit=self.agents_per_page)
        agents: list[tuple[AgentPosition, Document | None, list[str] | None]] = [
            (agent_position(agent), agent, None) for agent in page.items
        ]
        return agents, page.next is not None

    async def runs_of(self, agent: Document, named: list[str] | None) -> list[Document]:
        return await self.reader.all_runs(agent["agentId"])


@dataclass(frozen=True, slots=True)
class IndexedSearch:
    """Search through a backend's index, for one tenant, read through its reader."""

    index: SearchIndex
    tenant: str
    reader: HistoryReader
    agents_per_page: int = SCAN_AGENTS_PER_PAGE

    async def search_history(
        self, words: list[str], *, cursor: str | None, limit: int
    ) -> SearchPage:
        if not index_terms(words):
            # Nothing the index can look up (words of non-ASCII letters only): scan.
            scan = ScanSearch(self.reader, self.agents_per_page)
            return await scan.search_history(words, cursor=cursor, limit=limit)
        return await _search_page(self, words, cursor, limit, "index")

    async def rest_of(
        self, inside: Inside, words: list[str]
    ) -> tuple[Document, list[Document]] | None:
        # The index is asked from right before the agent: is it still a candidate, and
        # which of its runs does it name?
        before = inside.before()
        if before is None:
            return None
        found = await self.index.search_candidates(
            self.tenant, index_terms(words), after=before, limit=1
        )
        if not found or found[0][0] != inside.position():
            return None
        agent = await self.reader.agent(inside.agent_id)
        if agent is None:
            return None
        return agent, inside.runs_after(await self._runs(inside.agent_id, found[0][1]))

    async def agents_after(self, after: AgentPosition | None, words: list[str]) -> Slice:
        found = await self.index.search_candidates(
            self.tenant, index_terms(words), after=after, limit=self.agents_per_page + 1
        )
        page, more = found[: self.agents_per_page], len(found) > self.agents_per_page
        # Read as any page reads (the caller's tenant, no sdkMetadata); an agent or
        # run deleted since the index answered is just not there.
        agents: list[tuple[AgentPosition, Document | None, list[str] | None]] = [
            (position, await self.reader.agent(position.agent_id), run_ids)
            for position, run_ids in page
        ]
        return agents, more

    async def runs_of(self, agent: Document, named: list[str] | None) -> list[Document]:
        return await self._runs(agent["agentId"], named or [])

    async def _runs(self, agent_id: str, run_ids: list[str]) -> list[Document]:
        """The runs named, by turn: a get each for a few, else one read of them all."""
        if len(run_ids) <= FEW_RUNS:
            found = [await self.reader.run(agent_id, run_id) for run_id in run_ids]
            return [run for run in found if run is not None]
        wanted = set(run_ids)
        return [run for run in await self.reader.all_runs(agent_id) if run["runId"] in wanted]


async def search(
    searcher: Searcher, query: str, *, cursor: str | None, limit: int = HITS_PER_PAGE
) -> SearchPage:
    words = words_of(query)
    if not words:
        return SearchPage("", [], None, "none")
    return await searcher.search_history(words, cursor=cursor, limit=limit)


def search_index(stores: Stores) -> SearchIndex | None:
    """The backend index that covers ``stores``' agents, runs and events, if there is one.

    ``stores`` are the backends' own substores (before the server wraps them to seal
    secrets): an index answers only for the agents and runs of its own database.
    """
    events = stores.run_events
    if isinstance(events, SearchIndex) and events.indexes(stores.agents, stores.runs):
        return events
    return None


def searcher_for(index: SearchIndex | None, tenant: str, reader: HistoryReader) -> Searcher:
    """The index for ``tenant`` if the stores have one, else a scan through ``reader``."""
    if index is not None:
        return IndexedSearch(index, tenant, reader)
    return ScanSearch(reader)
