"""The tenant's runs across agents, newest first (or longest, or costliest), filtered.

Two ways answer it, behind :func:`runs_page`, and both give the same pages:

- the backend's :class:`~bridge_store.history.RunHistory` (SQL: one keyset query over
  the summary columns of revision 0005), asked for the caller's tenant alone;
- a scan everywhere else (memory, Redis, S3): every run of the tenant is read through
  the caller's :class:`~bridge_store.viewer.reader.HistoryReader` (``runs.list``, a
  thousand at a time), summarized, filtered and sorted here, and the page cut at the
  cursor. Its cost is reading every run for each page (docs/viewer.md has the figures),
  plus, with the workspace or creator filter, every agent of that workspace or the
  creators of the runs that pass the other filters. A workspace filter (the
  checkouts of one repository, docs/team.md) is always answered by the scan.

Cursors are :class:`~bridge_store.history.RunKey` positions either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import invalid_argument
from ..history import (
    RunFilters,
    RunKey,
    RunRow,
    Sort,
    parse_run_key,
    run_key,
    summarize_run,
)
from ..pricing.table import PriceTable
from ..types import Document
from .activity import Activity
from .queries import in_workspace
from .reader import FULL_PAGE, HistoryReader


@dataclass(frozen=True, slots=True)
class RunsPage:
    rows: list[RunRow]
    #: The cursor of the next page, None at the end.
    next: str | None
    #: "index" (the backend answered) or "scan" (read here).
    method: str


async def runs_page(
    reader: HistoryReader,
    activity: Activity,
    filters: RunFilters,
    sort: Sort,
    *,
    cursor: str | None,
    limit: int,
    prices: PriceTable | None = None,
) -> RunsPage:
    """One page of the run list for the reader's (and activity's) tenant; the ``cost``
    sort prices runs with ``prices`` (invalid_argument without a table)."""
    if sort == "cost" and prices is None:
        raise invalid_argument("sort=cost needs a price table (serve --prices)")
    after = parse_run_key(cursor, sort)
    index = activity.history() if filters.workspace is None else None
    if index is not None:
        rows = list(
            await index.runs_page(
                activity.tenant, filters, sort, after=after, limit=limit + 1, prices=prices
            )
        )
        method = "index"
    else:
        rows = await _scan(
            reader, activity, filters, sort, after=after, limit=limit + 1, prices=prices
        )
        method = "scan"
    page = rows[:limit]
    more = len(rows) > limit
    next_cursor = None
    if more and page:
        last = page[-1]
        key = run_key(sort, last.run, summarize_run(last.run), prices)
        if last.key is not None:  # the value the backend sorted by, as it worked it out
            key = dataclasses.replace(key, value=last.key)
        next_cursor = key.cursor(sort)
    return RunsPage(page, next_cursor, method)


async def _scan(
    reader: HistoryReader,
    activity: Activity,
    filters: RunFilters,
    sort: Sort,
    *,
    after: RunKey | None,
    limit: int,
    prices: PriceTable | None,
) -> list[RunRow]:
    of_cwd = await _agents_of(reader, filters.cwd) if filters.cwd is not None else None
    if filters.workspace is not None:
        of_workspace = await _agents_of_workspace(reader, filters.workspace)
        of_cwd = of_workspace if of_cwd is None else of_cwd & of_workspace
    keyed: list[tuple[RunKey, Document]] = []
    async for batch in reader.every_run():
        for run in batch:
            summary = summarize_run(run)
            if not filters.matches(summary):
                continue
            if of_cwd is not None and run["agentId"] not in of_cwd:
                continue
            key = run_key(sort, run, summary, prices)
            if after is None or key < after:
                keyed.append((key, run))
    keyed.sort(key=lambda item: item[0], reverse=True)
    if filters.creator is None:
        page = [run for _, run in keyed[:limit]]
        names = await activity.stores().runs.creators(
            activity.tenant, [(run["agentId"], run["runId"]) for run in page]
        )
        return [RunRow(run, names.get((run["agentId"], run["runId"]))) for run in page]
    # The creator is beside each run, not in it: ask for them in order until the page
    # fills, so only as many runs are looked up as the page needs.
    rows: list[RunRow] = []
    for start in range(0, len(keyed), FULL_PAGE):
        batch = [run for _, run in keyed[start : start + FULL_PAGE]]
        refs = [(run["agentId"], run["runId"]) for run in batch]
        names = await activity.stores().runs.creators(activity.tenant, refs)
        for run, ref in zip(batch, refs, strict=True):
            if filters.shows_creator(names.get(ref)):
                rows.append(RunRow(run, names.get(ref)))
                if len(rows) == limit:
                    return rows
    return rows


async def _agents_of_workspace(reader: HistoryReader, workspace: str) -> set[str]:
    """The ids of every agent kept against ``workspace``, in any of its directories."""
    found: set[str] = set()
    cursor: str | None = None
    while True:
        page = await reader.agents(cwd=None, cursor=cursor, limit=FULL_PAGE)
        found.update(agent["agentId"] for agent in page.items if in_workspace(agent, workspace))
        if page.next is None:
            return found
        cursor = page.next


async def _agents_of(reader: HistoryReader, cwd: str) -> set[str]:
    """The ids of every agent of one workspace (the store filters by cwd itself)."""
    found: set[str] = set()
    cursor: str | None = None
    while True:
        page = await reader.agents(cwd=cwd, cursor=cursor, limit=FULL_PAGE)
        found.update(agent["agentId"] for agent in page.items)
        if page.next is None:
            return found
        cursor = page.next
