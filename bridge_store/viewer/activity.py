"""What the history holds beyond CallStore's reads, for one tenant: who created what.

CallStore hands the bridge its documents and nothing else, so the creator recorded
beside each agent and run (``substores``: "Who started it") is read here, from the
served stores, for the caller's tenant alone, like the search index. Items without a
record (stored before it existed, copied or imported) are :data:`UNKNOWN`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..backend.history import UNKNOWN, RunHistory
from ..backend.shares import RunShares
from ..backend.statistics import RunStatistics
from ..stack.stores import Stores
from ..types import Document


@dataclass(frozen=True, slots=True)
class Activity:
    """Reads for one tenant that CallStore does not offer: the creators of items."""

    stores: Callable[[], Stores]
    tenant: str
    #: The backend's own run list across agents, when it has one for these stores
    #: (asked per request: the stores open after the viewer is built).
    history: Callable[[], RunHistory | None] = field(default=lambda: None)
    #: The backend's own counts for the overview, likewise.
    statistics: Callable[[], RunStatistics | None] = field(default=lambda: None)
    #: The backend's own per-day sums of who spent what, likewise.
    shares: Callable[[], RunShares | None] = field(default=lambda: None)

    async def agent_creators(self, agent_ids: Sequence[str]) -> dict[str, str]:
        """Agent id -> its creator's token name (:data:`UNKNOWN` when none is recorded)."""
        ids = list(dict.fromkeys(agent_ids))
        found = await self.stores().agents.creators(self.tenant, ids) if ids else {}
        return {agent_id: found.get(agent_id, UNKNOWN) for agent_id in ids}

    async def run_creators(self, runs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """(agentId, runId) -> its creator's token name (:data:`UNKNOWN` when none)."""
        keys = list(dict.fromkeys(runs))
        found = await self.stores().runs.creators(self.tenant, keys) if keys else {}
        return {key: found.get(key, UNKNOWN) for key in keys}

    async def with_agent_creators(self, agents: list[Document]) -> list[Document]:
        """``agents`` with ``createdBy`` added (copies: the reader's documents stay)."""
        names = await self.agent_creators([agent["agentId"] for agent in agents])
        return [{**agent, "createdBy": names[agent["agentId"]]} for agent in agents]

    async def with_run_creators(self, runs: list[Document]) -> list[Document]:
        """``runs`` with ``createdBy`` added (copies)."""
        names = await self.run_creators([(run["agentId"], run["runId"]) for run in runs])
        return [{**run, "createdBy": names[(run["agentId"], run["runId"])]} for run in runs]
