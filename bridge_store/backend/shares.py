"""Who spent what: a tenant's runs, failures and tokens per day, model and creator, and
per agent, and the optional capability a runs substore offers to sum them itself.

The overview prices tokens when it shows them (never stored: a price changed in the
file re-prices all history), so what it needs are sums of tokens per model over
stretches of days that each have one price per model. Two kinds of :class:`Share`:

- per (day, model, creator): the day's runs of one model started by one token name
  (None: no creator recorded). By-day, by-model and by-creator figures, the month's
  spend against a budget and ``/metrics``'s spend all sum these;
- per (span, model, agent): over each of a few spans of days (a window, the one
  before it, each cut where a price changes), the runs of one model by one agent.

The SQL backend keeps both as per-day sums beside its runs (a revision's tables, kept
by triggers as runs are written), so each is one range of an index; every other
backend's are summed by reading the runs (``viewer/scan.py``). Days are UTC day
numbers of the run's time (``summarize_run``'s ``started_at`` // a day), as for
:mod:`bridge_store.backend.statistics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

#: Token sums in ``history.TOKEN_KINDS`` order.
TokenSums = tuple[int, int, int, int]
NO_TOKENS: TokenSums = (0, 0, 0, 0)
#: A span of UTC days, the first one in, the end one out.
Span = tuple[int, int]


class Share(NamedTuple):
    """The runs of one model by one creator on one day, or by one agent in one span.

    A tuple: a month's overview of a store of a million runs a year reads tens of
    thousands of agent shares."""

    #: A day number (day shares) or the index of a span (agent shares).
    at: int
    model: str | None
    #: The creator's token name (None: none recorded), or the agent id.
    who: str | None
    runs: int
    failed: int
    tokens: TokenSums


@dataclass(frozen=True, slots=True)
class ModelUse:
    """A model the store has runs of (any tenant): its first and last day, its runs."""

    model: str
    first_day: int
    last_day: int
    runs: int


@runtime_checkable
class RunShares(Protocol):
    """What a runs substore implements to sum shares itself, for one tenant at a time
    (and, for ``/metrics`` and ``prices init``, across tenants)."""

    def covers(self, agents: object, runs: object) -> bool: ...

    async def day_shares(self, tenant: str, first_day: int, end_day: int) -> list[Share]:
        """Per (day, model, creator) of ``tenant``'s runs on days ``[first_day, end_day)``,
        each once, in any order."""
        ...

    async def agent_shares(
        self, tenant: str, spans: Sequence[Span], *, agents_from: int | None = None
    ) -> list[Share]:
        """Per (index of the span, model, agent) of ``tenant``'s runs in each span.

        With ``agents_from`` (a day on which a span starts), the spans before that day
        give only the shares of agents that have one from that day on: the by-agent
        table ranks the agents of the later spans and shows each one's figures of the
        earlier ones beside them, so the others' shares would be read for nothing."""
        ...

    async def tenant_shares(self, first_day: int, end_day: int) -> list[tuple[str, Share]]:
        """Per (tenant, day, model) of every tenant's runs on those days (``who`` None)."""
        ...

    async def models_seen(self) -> list[ModelUse]:
        """Every model of every tenant's runs (runs without a model left out)."""
        ...


def run_shares(agents: object, runs: object) -> RunShares | None:
    """The capability of ``runs`` (a backend's own substore), if it covers ``agents``."""
    if isinstance(runs, RunShares) and runs.covers(agents, runs):
        return runs
    return None


def add_tokens(a: TokenSums, b: TokenSums) -> TokenSums:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])
