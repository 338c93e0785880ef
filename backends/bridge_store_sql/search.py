"""The viewer's search, narrowed by the full-text index of revisions 0003 and 0007.

:class:`SearchableRunEvents` is the run-events substore plus
:meth:`~SearchableRunEvents.search_candidates`, which the viewer's ``IndexedSearch``
calls (``bridge_store.backend.features.SearchIndex``): for one tenant and a few prefixes
(lowercase ASCII letters and digits), the agents, in list order, whose name has a
word starting with every prefix or that have a run in which every prefix starts a
word of some user or assistant event; and those runs. The viewer then reads these
agents and runs and matches them exactly as its scan does, so the index only has to
name every match, not only matches.

The index itself is kept by the database (triggers on SQLite, expression indexes on
Postgres; see ``bridge_store_migrations/versions/0003_search.py``), so no write here
or elsewhere in the backend touches it.
"""

# Statements are put together from this module's constants; every value is bound.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from bridge_store.backend.substores import AgentPosition

from .agents import SqlAgents
from .engine import Database
from .events import SqlRunEvents
from .migrate import revisions
from .runs import SqlRuns
from .statements import Session

#: Each term: the run ids of the tenant with an event holding a word that starts with it.
_EVENT_TERM = {
    "sqlite": (
        "SELECT r.run_id FROM search_event_rows AS r WHERE r.tenant = :tenant AND r.id IN "
        "(SELECT rowid FROM search_events WHERE search_events MATCH :{term})"
    ),
    # The expression is the index's own (ix_run_events_search), so the index answers it.
    "postgresql": (
        "SELECT run_id FROM run_events WHERE tenant = :tenant AND "
        "to_tsvector('simple'::regconfig, bridge_store_search_text(doc)) "
        "@@ to_tsquery('simple', :{term})"
    ),
}
#: The tenant's agents whose name holds a word starting with every term (``:names``).
_NAMED = {
    "sqlite": (
        "SELECT r.agent_id FROM search_agent_rows AS r WHERE r.tenant = :tenant AND r.id IN "
        "(SELECT rowid FROM search_agents WHERE search_agents MATCH :names)"
    ),
    "postgresql": (
        "SELECT agent_id FROM agents WHERE tenant = :tenant AND "
        "to_tsvector('simple'::regconfig, bridge_store_search_name(doc)) "
        "@@ to_tsquery('simple', :names)"
    ),
}


def _prefix(dialect: str, term: str) -> str:
    """``term`` as a prefix query; terms are ASCII letters and digits, nothing to quote."""
    if not term.isascii() or not term.isalnum():
        raise ValueError(f"search terms are ASCII letters and digits, not {term!r}")
    return f'"{term}"*' if dialect == "sqlite" else f"{term}:*"


def _hit_runs(dialect: str, terms: Sequence[str]) -> tuple[str, dict[str, object]]:
    """A CTE of the runs where every term starts a word of some event, and its values."""
    selects = [_EVENT_TERM[dialect].format(term=f"term{n}") for n in range(len(terms))]
    values: dict[str, object] = {f"term{n}": _prefix(dialect, term) for n, term in enumerate(terms)}
    return "hit_runs AS (" + " INTERSECT ".join(selects) + ")", values


def candidates_statement(
    dialect: str, tenant: str, terms: Sequence[str], *, after: AgentPosition | None, limit: int
) -> sa.TextClause:
    """The page of candidate agents (``updated_at``, ``agent_id``) after ``after``.

    Built per call with its values bound (its shape varies with the terms), so it is
    compiled per call, like the substores' other rare statements.
    """
    hit_runs, values = _hit_runs(dialect, terms)
    joiner = " AND " if dialect == "sqlite" else " & "
    values.update(
        tenant=tenant, names=joiner.join(_prefix(dialect, term) for term in terms), limit=limit
    )
    after_clause = ""
    if after is not None:
        # List order is (updated_at, agent_id) descending, as agents.list pages it.
        after_clause = " AND (a.updated_at, a.agent_id) < (:after_updated_at, :after_agent_id)"
        values.update(after_updated_at=after.updated_at, after_agent_id=after.agent_id)
    sql = (
        f"WITH {hit_runs}, candidates AS ("
        "SELECT agent_id FROM runs WHERE tenant = :tenant "
        "AND run_id IN (SELECT run_id FROM hit_runs) "
        f"UNION {_NAMED[dialect]}) "
        "SELECT a.updated_at, a.agent_id FROM agents AS a WHERE a.tenant = :tenant "
        f"AND a.agent_id IN (SELECT agent_id FROM candidates){after_clause} "
        "ORDER BY a.updated_at DESC, a.agent_id DESC LIMIT :limit"
    )
    return sa.text(sql).bindparams(**values)


def runs_statement(
    dialect: str, tenant: str, terms: Sequence[str], agent_ids: Sequence[str]
) -> sa.TextClause:
    """The candidate runs of ``agent_ids``, by agent, then turn."""
    hit_runs, values = _hit_runs(dialect, terms)
    sql = (
        f"WITH {hit_runs} SELECT agent_id, run_id FROM runs WHERE tenant = :tenant "
        "AND agent_id IN :agent_ids AND run_id IN (SELECT run_id FROM hit_runs) "
        "ORDER BY agent_id, turn_number, run_id"
    )
    return sa.text(sql).bindparams(
        sa.bindparam("agent_ids", list(agent_ids), expanding=True), tenant=tenant, **values
    )


#: The schema revision whose index reads what the search matches (0003 added it for
#: prompts and answers; 0007 made it read tool calls and statuses too). A store at an
#: older revision, read without migrating, is scanned.
INDEX_REVISION = "0007"


def has_index(revision: str | None) -> bool:
    """Whether a database at ``revision`` has the index (a known revision, 0007 or later)."""
    known = revisions()
    return revision in known and known.index(revision) >= known.index(INDEX_REVISION)


class SearchableRunEvents(SqlRunEvents):
    """The run-events substore, which also answers the viewer's index lookups."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._search_db = db
        #: Set by the backend's start: whether the schema has the index (a store read
        #: without migrating, by ``bridge-store ui`` say, may be older; it is scanned).
        self.index_ready = False

    def indexes(self, agents: object, runs: object) -> bool:
        """The index covers the agents and runs of this database only."""
        # (Another substore's private _db: these are one backend's own classes.)
        return (
            self.index_ready
            and isinstance(agents, SqlAgents)
            and isinstance(runs, SqlRuns)
            and agents._db is self._search_db
            and runs._db is self._search_db
        )

    async def search_candidates(
        self, tenant: str, terms: Sequence[str], *, after: AgentPosition | None, limit: int
    ) -> list[tuple[AgentPosition, list[str]]]:
        if not terms:
            raise ValueError("a search needs at least one term")
        dialect = self._search_db.dialect

        def work(session: Session) -> list[tuple[AgentPosition, list[str]]]:
            page = candidates_statement(dialect, tenant, terms, after=after, limit=limit)
            agents = [
                AgentPosition(updated_at=int(updated_at), agent_id=str(agent_id))
                for updated_at, agent_id in session.execute(page)
            ]
            if not agents:
                return []
            runs: dict[str, list[str]] = {agent.agent_id: [] for agent in agents}
            ids = [agent.agent_id for agent in agents]
            for agent_id, run_id in session.execute(runs_statement(dialect, tenant, terms, ids)):
                runs[str(agent_id)].append(str(run_id))
            return [(agent, runs[agent.agent_id]) for agent in agents]

        # Two statements, read outside a transaction: a write between them can only
        # make the page name a run that is gone, or miss one just written, and the
        # viewer reads each agent and run again anyway.
        return await self._search_db.read(work, what="search")
