"""The viewer's pages: one function each, returning the data its template shows.

Each function answers both the page and its ``?format=json`` twin (datasette's way:
the template renders exactly the data a script gets). The transcript also answers
``?format=fragment``: the same page's blocks as HTML, for live updates and paging.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.datastructures import QueryParams

from ..backend.history import SORTS, RunFilters, Sort, summarize_run
from ..errors import invalid_argument, not_found
from ..pricing.book import PriceBook
from ..pricing.money import cost_text
from ..pricing.table import PriceTable
from ..security.auth import Principal
from ..types import Document
from . import charts, queries
from .activity import Activity
from .agent_rows import agent_rows, display_name, has_own_name
from .collector import collector_paused
from .costs import page as cost_page
from .costs.scan import SCAN_LIMIT
from .outline import outline
from .overview import day_text
from .reader import HistoryReader
from .runs_list import COST_SORT_LIMIT, runs_page
from .search import Searcher, search
from .transcript import TranscriptBuilder
from .welcome import Welcome

#: Raw event pages are for looking at a few events closely.
DEFAULT_RAW_EVENTS = 50


@dataclass(frozen=True, slots=True)
class View:
    """A page: its template, its title and the data both it and ``?format=json`` show."""

    template: str
    title: str
    data: Document


@dataclass(frozen=True, slots=True)
class Context:
    """What a signed-in request reads with, scoped to its principal's tenant.

    ``welcome`` is what an empty agents list tells that principal; ``server_url`` the
    server's address as the request reached it (for the command that connects a bridge).
    """

    reader: HistoryReader
    searcher: Searcher
    #: Who created what, and the other reads CallStore does not offer (same tenant).
    activity: Activity
    #: Who is signed in: every page says so.
    principal: Principal
    #: What pages price tokens at (``--prices``, read again on SIGHUP), if anything.
    prices: PriceBook | None = None
    welcome: Welcome | None = None
    server_url: str = ""
    #: The principal holds the server's one token (serve's shorthand, ``ui``'s), whose
    #: name is no person's: pages say "the server's token" rather than its name.
    server_token: bool = False
    #: Runs the overview reads at most on a store that keeps no per-day sums (None:
    #: every one; the CLI reading a store itself).
    scan_limit: int | None = SCAN_LIMIT

    def price_table(self) -> PriceTable | None:
        return self.prices.table if self.prices is not None else None

    def prices_json(self) -> Document | None:
        """Which table priced a page (its currency, version), and why the file's last
        read was not taken, if it was not; None without a table."""
        table = self.price_table()
        if table is None:
            return None
        problem = self.prices.problem if self.prices is not None else None
        return {**table.describe(), "problem": problem}

    def signed_in(self) -> Document:
        signed_in: Document = {"name": self.principal.name, "tenant": self.principal.tenant}
        if self.server_token:
            signed_in["serverToken"] = True
        return signed_in


PageFunction = Callable[[Context, QueryParams], Awaitable[View]]


def refuse_nul(params: QueryParams) -> None:
    """``invalid_argument`` naming the first parameter that holds a NUL.

    No store keys by NUL: left to the backends, Postgres refused such a filter while
    the others looked for it and found nothing. Every page and export asks this first,
    so every backend answers the same.
    """
    for name, value in params.multi_items():
        if "\x00" in name or "\x00" in value:
            raise invalid_argument(f"the {name!r} parameter must not contain NUL")


def _required(params: QueryParams, name: str) -> str:
    value = params.get(name)
    if not value:
        raise invalid_argument(f"the {name!r} parameter is required")
    return value


def _flag(params: QueryParams, name: str) -> bool:
    return params.get(name, "") not in ("", "0", "false", "off")


def agent_filters(params: QueryParams) -> queries.AgentFilters:
    status = params.get("status") or None
    if status is not None and status not in queries.AGENT_STATUSES:
        raise invalid_argument(f"status must be one of {', '.join(queries.AGENT_STATUSES)}")
    return queries.AgentFilters(
        cwd=params.get("cwd") or None,
        status=status,
        name=params.get("name") or None,
        archived=_flag(params, "archived"),
        workspace=params.get("workspace") or None,
    )


async def agents(context: Context, params: QueryParams) -> View:
    data = await queries.agents_page(
        context.reader,
        agent_filters(params),
        cursor=params.get("cursor") or None,
        limit=queries.page_limit(params.get("limit"), queries.DEFAULT_AGENTS_PAGE),
    )
    rows = await agent_rows(context.reader, data["agents"])
    data["agents"] = await context.activity.with_agent_creators(rows)
    data["cursor"] = params.get("cursor") or None
    # A page size given in the address stays in the pager's links, like the filters.
    data["limit"] = params.get("limit") or None
    data["statuses"] = list(queries.AGENT_STATUSES)
    unfiltered = not any(data["filters"].values()) and data["cursor"] is None
    if context.welcome is not None and unfiltered and not data["agents"] and not data["next"]:
        # The first page anyone sees: how to fill it, rather than "nothing matches".
        data["welcome"] = await context.welcome.describe(context.server_url)
    return View("agents.html", "Agents", data)


async def agent(context: Context, params: QueryParams) -> View:
    data = await queries.agent_page(context.reader, _required(params, "id"))
    first_run = data["runs"][-1]["runId"] if data["runs"] else None
    name = await display_name(context.reader, data["agent"], first_run)
    [agent] = await context.activity.with_agent_creators([data["agent"]])
    data["agent"] = {**agent, "displayName": name}
    prices = context.price_table()
    data["runs"] = priced_runs(await context.activity.with_run_creators(data["runs"]), prices)
    data["priced"] = prices is not None
    data["prices"] = context.prices_json()
    if prices is not None:
        # Every run's cost, exactly, and how many have none (unpriced or no usage).
        costs = [run_cost(run, prices) for run in data["runs"]]
        data["cost"] = cost_text(sum(cost for cost in costs if cost is not None))
        data["unpricedRuns"] = sum(1 for cost in costs if cost is None)
    return View("agent.html", name, data)


def run_filters(params: QueryParams) -> RunFilters:
    """The run list's filters from a page address (each rides in the URL, so it stays
    while paging); ``since`` and ``until`` are UTC dates, both included."""
    status = params.get("status") or None
    if status is not None and status not in queries.RUN_STATUSES:
        raise invalid_argument(f"status must be one of {', '.join(queries.RUN_STATUSES)}")
    until = queries.utc_day(params.get("until"), "until")
    return RunFilters(
        status=status,
        model=params.get("model") or None,
        cwd=params.get("cwd") or None,
        since=queries.utc_day(params.get("since"), "since"),
        until=None if until is None else until + queries.DAY_MS,
        creator=params.get("by") or None,
        workspace=params.get("workspace") or None,
    )


def run_sort(params: QueryParams) -> Sort:
    wanted = params.get("sort") or "newest"
    for sort in SORTS:
        if sort == wanted:
            return sort
    raise invalid_argument(f"sort must be one of {', '.join(SORTS)}")


async def runs(context: Context, params: QueryParams) -> View:
    """Every run of the tenant across agents, newest (or longest, costliest) first."""
    sort = run_sort(params)
    cursor = params.get("cursor") or None
    prices = context.price_table()
    page = await runs_page(
        context.reader,
        context.activity,
        run_filters(params),
        sort,
        cursor=cursor,
        limit=queries.page_limit(params.get("limit"), queries.DEFAULT_RUNS_PAGE),
        prices=prices,
        scan_limit=context.scan_limit,
    )
    shown = ("status", "model", "cwd", "workspace", "since", "until", "by")
    filters = {name: params.get(name) or None for name in shown}
    if page.narrowed_since is not None:
        # The form and every link keep the range the page ranked, so the next page
        # continues the same order.
        filters["since"] = day_text(page.narrowed_since // queries.DAY_MS)
    data: Document = {
        "filters": filters,
        "sort": sort,
        "runs": priced_runs(await queries.run_rows(context.reader, page.rows), prices),
        "cursor": cursor,
        "next": page.next,
        "limit": params.get("limit") or None,
        "method": page.method,
        "statuses": list(queries.RUN_STATUSES),
        "sorts": [one for one in SORTS if one != "cost" or prices is not None],
        "priced": prices is not None,
        "prices": context.prices_json(),
    }
    if page.narrowed_since is not None:
        data["narrowed"] = {"since": filters["since"], "limit": COST_SORT_LIMIT}
    if page.too_large is not None:
        data["tooLarge"] = {"runs": page.too_large}
    return View("runs.html", "Runs", data)


def priced_runs(rows: list[Document], prices: PriceTable | None) -> list[Document]:
    """Each run with its ``cost`` at the prices in force on its day (decimal text; None:
    unpriced or no usage), when there is a price table."""
    if prices is not None:
        for row in rows:
            row["cost"] = cost_text(run_cost(row, prices))
    return rows


def run_cost(run: Document, prices: PriceTable) -> int | None:
    summary = summarize_run(run)
    return prices.run_cost(summary.model_id, summary.started_at, summary.tokens)


async def overview(context: Context, params: QueryParams) -> View:
    """The last 7 and 30 days (ending ``to``, a UTC date, today unless given) per day and
    per model, and for the one ``days`` picks, who spent what against the days before
    and the month's budget; priced with the table of the moment."""
    days = params.get("days") or str(cost_page.WINDOWS[0])
    if days not in {str(size) for size in cost_page.WINDOWS}:
        raise invalid_argument(f"days must be one of {', '.join(map(str, cost_page.WINDOWS))}")
    to = queries.utc_day(params.get("to"), "to")
    today = (to if to is not None else queries.now_ms()) // queries.DAY_MS
    if today - 2 * max(cost_page.WINDOWS) + 1 < 0:
        # Runs have no time before 1970 (a run without one is at 0): nor has a window.
        raise invalid_argument("to must be a day after 1970-03-01")
    prices = context.price_table()
    with collector_paused():
        return await _overview(context, today, days, prices)


async def _overview(context: Context, today: int, days: str, prices: PriceTable | None) -> View:
    got = await cost_page.read(
        context.reader, context.activity, today, int(days), prices, context.scan_limit
    )
    data: Document = {
        "days": int(days),
        "to": day_text(today),
        "method": got.method,
        "priced": prices is not None,
        "prices": context.prices_json(),
    }
    if got.too_large is not None:
        data["tooLarge"] = {"runs": got.too_large}
        return View("overview.html", "Overview", data)
    data.update(cost_page.overview_data(got, today, int(days), prices, context.activity.tenant))
    await name_agents(context, data["byAgent"]["rows"])
    data["charts"] = charts.overview_charts(data, prices)
    return View("overview.html", f"Overview: last {days} days", data)


async def name_agents(context: Context, rows: list[Document]) -> None:
    """Each agent row's name, as the agents list shows it."""
    for row in rows:
        found = await context.reader.agent(row["agentId"])
        if found is None:
            row["name"] = row["agentId"]
            continue
        first = None
        if not has_own_name(found):
            page = await context.reader.runs(row["agentId"], cursor=None, limit=1)
            first = page.items[0]["runId"] if page.items else None
        row["name"] = await display_name(context.reader, found, first)


async def run(context: Context, params: QueryParams) -> View:
    data = await queries.transcript_page(
        context.reader,
        _required(params, "agent"),
        _required(params, "id"),
        after=params.get("after") or None,
        limit=queries.page_limit(params.get("limit"), queries.DEFAULT_EVENTS_PAGE),
    )
    [data["run"]] = priced_runs(
        await context.activity.with_run_creators([data["run"]]), context.price_table()
    )
    data["priced"] = context.price_table() is not None
    data["prices"] = context.prices_json()
    name = (data["agent"] or {}).get("name") or data["run"]["agentId"]
    return View("run.html", f"{name}: turn {data['run'].get('turnNumber')}", data)


async def outline_page(context: Context, params: QueryParams) -> View:
    """Every step of a run, with jumps to its first error and its end."""
    agent_id, run_id = _required(params, "agent"), _required(params, "id")
    found = await context.reader.run(agent_id, run_id)
    if found is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    builder = TranscriptBuilder()
    async for event in context.reader.all_events(run_id):
        builder.add(event)
    data = {"run": queries.run_summary(found), "start": summarize_run(found).started_at}
    data.update(outline(builder))
    return View("outline.html", f"Outline of turn {found.get('turnNumber')}", data)


async def events(context: Context, params: QueryParams) -> View:
    """Stored events as they are, a page at a time: the raw view behind every block."""
    agent_id, run_id = _required(params, "agent"), _required(params, "run")
    found = await context.reader.run(agent_id, run_id)
    if found is None:
        raise not_found(f"agent {agent_id!r} has no run {run_id!r}")
    after = params.get("after") or None
    page = await context.reader.events(
        run_id, after=after, limit=queries.page_limit(params.get("limit"), DEFAULT_RAW_EVENTS)
    )
    data = {"run": found, "after": after, "events": page.items, "next": page.next}
    return View("events.html", f"Events of run {run_id}", data)


async def find_run(context: Context, params: QueryParams) -> Document:
    """The run a bare run id names (for /ui/run?id= links without an agent)."""
    return await queries.find_run(context.reader, _required(params, "id"))


async def search_page(context: Context, params: QueryParams) -> View:
    query = params.get("q", "")
    page = await search(context.searcher, query, cursor=params.get("cursor") or None)
    data = page.to_json()
    data["cursor"] = params.get("cursor") or None
    return View("search.html", f"Search: {query}" if query else "Search", data)
