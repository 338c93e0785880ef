"""The tenant's runs across agents, newest first (or longest, or costliest), filtered.

Two ways answer it, behind :func:`runs_page`, and both give the same pages:

- the backend's :class:`~bridge_store.backend.history.RunHistory` (SQL: one keyset query over
  the summary columns of revision 0005), asked for the caller's tenant alone;
- a scan everywhere else (memory, Redis, S3): every run of the tenant is read through
  the caller's :class:`~bridge_store.viewer.reader.HistoryReader` (``runs.list``, a
  thousand at a time), summarized, filtered and sorted here, and the page cut at the
  cursor. Its cost is reading every run for each page (docs/viewer.md has the figures),
  plus, with the workspace or creator filter, every agent of that workspace or the
  creators of the runs that pass the other filters. A workspace filter (the
  checkouts of one repository, docs/team.md) is always answered by the scan.

Cursors are :class:`~bridge_store.backend.history.RunKey` positions either way.

On a store without the index the scan stops after ``scan_limit`` runs and answers
``too_large`` (no rows) rather than reading on for seconds. The ``cost`` order has
no index (a cost depends on the price table of the moment), so the database prices
and sorts every run the filters leave: when the backend's per-day sums
(:class:`~bridge_store.backend.shares.RunShares`) count more than :data:`COST_SORT_LIMIT` of
them, the page ranks those of the most recent days that hold at most that many
(``narrowed_since``, a UTC midnight the page shows as its ``since``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

from ..backend.history import (
    RunFilters,
    RunKey,
    RunRow,
    Sort,
    parse_run_key,
    run_key,
    summarize_run,
)
from ..backend.statistics import DAY_MS, FAILED
from ..errors import invalid_argument
from ..pricing.table import PriceTable
from ..types import Document
from .activity import Activity
from .queries import in_workspace
from .reader import FULL_PAGE, HistoryReader

#: Runs the ``cost`` order prices and sorts at most per page (about 100 ms of SQLite
#: over 1,000,000 runs; every run of such a store took seconds).
COST_SORT_LIMIT = 100_000
#: The day after every day a run can have (its bound when the filters give none).
_NO_END_DAY = 2**40


@dataclass(frozen=True, slots=True)
class RunsPage:
    rows: list[RunRow]
    #: The cursor of the next page, None at the end.
    next: str | None
    #: "index" (the backend answered) or "scan" (read here).
    method: str
    #: The cost order kept to the runs since this time (a UTC midnight, epoch ms).
    narrowed_since: int | None = None
    #: The scan stopped: the tenant holds more runs than this (no rows given).
    too_large: int | None = None


async def runs_page(
    reader: HistoryReader,
    activity: Activity,
    filters: RunFilters,
    sort: Sort,
    *,
    cursor: str | None,
    limit: int,
    prices: PriceTable | None = None,
    scan_limit: int | None = None,
) -> RunsPage:
    """One page of the run list for the reader's (and activity's) tenant; the ``cost``
    sort prices runs with ``prices`` (invalid_argument without a table). The scan of a
    store without the index reads at most ``scan_limit`` runs (None: all)."""
    if sort == "cost" and prices is None:
        raise invalid_argument("sort=cost needs a price table (serve --prices)")
    after = parse_run_key(cursor, sort)
    history = activity.history()
    index = history if filters.workspace is None else None
    narrowed = None
    if index is not None and sort == "cost":
        narrowed = await _cost_since(activity, filters)
        if narrowed is not None:
            filters = dataclasses.replace(filters, since=narrowed)
    if index is not None:
        rows = list(
            await index.runs_page(
                activity.tenant, filters, sort, after=after, limit=limit + 1, prices=prices
            )
        )
        method = "index"
    else:
        scanned = await _scan(
            reader,
            activity,
            filters,
            sort,
            after=after,
            limit=limit + 1,
            prices=prices,
            # Bounded where every page is a scan: a store without the index.
            scan_limit=scan_limit if history is None else None,
        )
        if scanned is None:
            assert scan_limit is not None
            return RunsPage([], None, "scan", too_large=scan_limit)
        rows, method = scanned, "scan"
    page = rows[:limit]
    more = len(rows) > limit
    next_cursor = None
    if more and page:
        last = page[-1]
        key = run_key(sort, last.run, summarize_run(last.run), prices)
        if last.key is not None:  # the value the backend sorted by, as it worked it out
            key = dataclasses.replace(key, value=last.key)
        next_cursor = key.cursor(sort)
    return RunsPage(page, next_cursor, method, narrowed_since=narrowed)


async def _cost_since(activity: Activity, filters: RunFilters) -> int | None:
    """Where the cost order starts when the filters leave more than
    :data:`COST_SORT_LIMIT` runs: the first of the most recent days that hold at most
    that many (the latest day alone if it holds more), else None.

    Counted from the per-day sums, which know each day's model and creator and its
    failed runs: a count that is never below the runs the filters leave (the workspace
    and statuses other than ``error`` are not in the sums, so those runs all count).
    """
    sums = activity.shares()
    if sums is None:
        return None
    first = 0 if filters.since is None else filters.since // DAY_MS
    end = _NO_END_DAY if filters.until is None else (filters.until - 1) // DAY_MS + 1
    per_day: Counter[int] = Counter()
    for share in await sums.day_shares(activity.tenant, first, end):
        if filters.model is not None and share.model != filters.model:
            continue
        if not filters.shows_creator(share.who):
            continue
        per_day[share.at] += share.failed if filters.status == FAILED else share.runs
    if sum(per_day.values()) <= COST_SORT_LIMIT:
        return None
    counted = 0
    days = sorted(per_day, reverse=True)
    for newer, day in pairwise(days):
        counted += per_day[newer]
        if counted + per_day[day] > COST_SORT_LIMIT:
            return max(newer * DAY_MS, filters.since or 0)
    return None  # one day holds them all: it is the range already


async def _scan(
    reader: HistoryReader,
    activity: Activity,
    filters: RunFilters,
    sort: Sort,
    *,
    after: RunKey | None,
    limit: int,
    prices: PriceTable | None,
    scan_limit: int | None,
) -> list[RunRow] | None:
    """The page's rows, or None when the tenant holds more than ``scan_limit`` runs."""
    of_cwd = await _agents_of(reader, filters.cwd) if filters.cwd is not None else None
    if filters.workspace is not None:
        of_workspace = await _agents_of_workspace(reader, filters.workspace)
        of_cwd = of_workspace if of_cwd is None else of_cwd & of_workspace
    keyed: list[tuple[RunKey, Document]] = []
    read = 0
    async for batch in reader.every_run():
        read += len(batch)
        if scan_limit is not None and read > scan_limit:
            return None
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
