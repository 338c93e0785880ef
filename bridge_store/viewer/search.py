"""Full-text search over agent names and the user and assistant text of runs.

Two ways to answer, behind one seam: a backend whose substore offers
:class:`IndexedSearch` (a SQL full-text index, say) answers from its index; every
other store is searched by :class:`ScanSearch`, which reads the history through the
viewer's :class:`~bridge_store.viewer.reader.HistoryReader` like any page does. A scan
costs what reading the history costs, so it goes a bounded slice at a time: each page
of results covers :data:`SCAN_AGENTS_PER_PAGE` agents (newest first) with all their
runs, and hands back the agents cursor to continue from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..stores import Stores
from ..types import Document
from .reader import HistoryReader
from .transcript import Text, TranscriptBuilder

SCAN_AGENTS_PER_PAGE = 20
#: A run contributes at most this many matching blocks; the transcript shows the rest.
HITS_PER_RUN = 3
SNIPPET_CHARS = 160
MAX_QUERY_CHARS = 200
SEARCHED_KINDS = ("user", "assistant")


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


@runtime_checkable
class IndexedSearch(Protocol):
    """What a substore implements to answer searches from an index of its own.

    ``search_history`` gets the query's words (lowercased, at least one) and returns a
    page of hits shaped as :class:`ScanSearch` makes them, with a cursor of its own.
    """

    async def search_history(
        self, words: list[str], *, cursor: str | None, limit: int
    ) -> SearchPage: ...


def words_of(query: str) -> list[str]:
    return query[:MAX_QUERY_CHARS].casefold().split()


def matches(text: str, words: list[str]) -> bool:
    folded = text.casefold()
    return all(word in folded for word in words)


def snippet(text: str, words: list[str]) -> str:
    """A short piece of ``text`` around the first word found."""
    at = text.casefold().find(words[0]) if words else 0
    start = max(0, at - SNIPPET_CHARS // 3)
    piece = text[start : start + SNIPPET_CHARS].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


@dataclass(frozen=True, slots=True)
class ScanSearch:
    """Search by reading: agent names, then each run's user and assistant text."""

    reader: HistoryReader
    agents_per_page: int = SCAN_AGENTS_PER_PAGE

    async def search_history(
        self, words: list[str], *, cursor: str | None, limit: int
    ) -> SearchPage:
        # A scan's page is bounded by the agents it reads, not by its hits (``limit``):
        # stopping at a hit count would need a cursor inside an agent's runs.
        page = await self.reader.agents(cwd=None, cursor=cursor, limit=self.agents_per_page)
        hits: list[Document] = []
        for agent in page.items:
            name = agent.get("name")
            if isinstance(name, str) and matches(name, words):
                hits.append({"kind": "agent", "agent": agent, "text": name})
            for run in await self.reader.all_runs(agent["agentId"]):
                hits.extend(await self._run_hits(agent, run, words))
        return SearchPage(" ".join(words), hits, page.next, "scan")

    async def _run_hits(self, agent: Document, run: Document, words: list[str]) -> list[Document]:
        builder = TranscriptBuilder()
        async for event in self.reader.all_events(run["runId"]):
            builder.add(event)
        hits: list[Document] = []
        for block in builder.blocks:
            if (
                isinstance(block, Text)
                and block.kind in SEARCHED_KINDS
                and matches(block.text, words)
            ):
                hits.append(
                    {
                        "kind": block.kind,
                        "agent": agent,
                        "run": {
                            k: run.get(k) for k in ("runId", "agentId", "turnNumber", "status")
                        },
                        "seq": block.seqs[0],
                        "text": snippet(block.text, words),
                    }
                )
                if len(hits) == HITS_PER_RUN:
                    break
        return hits


async def search(
    searcher: IndexedSearch, query: str, *, cursor: str | None, limit: int = 50
) -> SearchPage:
    words = words_of(query)
    if not words:
        return SearchPage("", [], None, "none")
    return await searcher.search_history(words, cursor=cursor, limit=limit)


def searcher_for(stores: Stores, reader: HistoryReader) -> IndexedSearch:
    """The backend's own index if the events' (or agents') substore offers one, else a scan."""
    for substore in (stores.run_events, stores.agents):
        if isinstance(substore, IndexedSearch):
            return substore
    return ScanSearch(reader)
