"""Comparing two stores' history: counts per substore and a digest per agent.

A census walks a store as copying does (:mod:`.walk`, without the second look at
agents updated meanwhile) and keeps, per agent, a SHA-256 over the agent document,
its runs, their events and its blobs (canonical JSON, blob bytes hashed), so two
stores compare without holding either in memory: only one digest per agent. Verify
after writers stopped; against a store still written to it reports what changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from bridge_store.backend.substores import SUBSTORE_NAMES, SubstoreName
from bridge_store.stack.stores import Stores

from .items import AgentItem, EventsItem, Item, RunItem, canonical
from .walk import agent_items, agents_of, tenants_of

#: Differences listed in a report; the rest are counted.
MAX_LISTED = 50


@dataclass
class Census:
    counts: dict[SubstoreName, int] = field(
        default_factory=lambda: dict.fromkeys(SUBSTORE_NAMES, 0)
    )
    #: (tenant, agentId) -> the agent's digest.
    digests: dict[tuple[str, str], bytes] = field(default_factory=dict)


async def census(stores: Stores, tenants: Sequence[str]) -> Census:
    """Counts and per-agent digests of ``tenants`` in ``stores``."""
    result = Census()
    for tenant in tenants:
        async for agent in agents_of(stores, tenant):
            digest = AgentDigest(result)
            async for item in agent_items(stores, tenant, agent):
                await digest.feed(item)
            result.digests[(tenant, agent["agentId"])] = digest.digest()
    return result


class AgentDigest:
    """The digest of one agent's items (as :func:`~.walk.agent_items` gives them),
    counting them into ``census``."""

    def __init__(self, census: Census) -> None:
        self._census = census
        self._hash = hashlib.sha256()

    async def feed(self, item: Item) -> None:
        counts = self._census.counts
        parts: list[bytes]
        if isinstance(item, AgentItem):
            counts["agents"] += 1
            parts = [b"agent", canonical(item.document)]
        elif isinstance(item, RunItem):
            counts["runs"] += 1
            parts = [b"run", canonical(item.document)]
        elif isinstance(item, EventsItem):
            counts["runEvents"] += len(item.events)
            parts = [b"event" + canonical(event) for event in item.events]
        else:
            data = await item.read()
            if data is None:
                return
            counts["checkpoints"] += 1
            blob_id = item.blob_id.encode("utf-8", "surrogatepass")
            parts = [b"blob", blob_id, hashlib.sha256(data).digest()]
        for part in parts:
            # Length-prefixed, so no two different sequences of parts hash alike.
            self._hash.update(len(part).to_bytes(8, "big") + part)

    def digest(self) -> bytes:
        return self._hash.digest()


@dataclass
class Comparison:
    source: Census
    target: Census
    differences: list[str] = field(default_factory=list)
    different: int = 0

    @property
    def same(self) -> bool:
        return self.different == 0

    def summary(self) -> str:
        counts = ", ".join(f"{name} {self.source.counts[name]}" for name in SUBSTORE_NAMES)
        if self.same:
            return f"verified: both stores hold the same history ({counts})"
        return f"verify found {self.different} differences (source: {counts})"


def compare(source: Census, target: Census) -> Comparison:
    comparison = Comparison(source, target)

    def differ(line: str) -> None:
        comparison.different += 1
        if len(comparison.differences) < MAX_LISTED:
            comparison.differences.append(line)

    for name in SUBSTORE_NAMES:
        if source.counts[name] != target.counts[name]:
            differ(
                f"{name}: {source.counts[name]} in the source, {target.counts[name]} in the copy"
            )
    for (tenant, agent_id), digest in source.digests.items():
        held = target.digests.get((tenant, agent_id))
        if held is None:
            differ(f"agent {agent_id} of tenant {tenant} is missing from the copy")
        elif held != digest:
            differ(f"agent {agent_id} of tenant {tenant} differs (its runs, events or blobs)")
    for tenant, agent_id in target.digests.keys() - source.digests.keys():
        differ(f"agent {agent_id} of tenant {tenant} is in the copy only")
    return comparison


async def verify(source: Stores, target: Stores, tenants: Sequence[str] | None) -> Comparison:
    """Compare the tenants (default: every tenant of either store)."""
    if tenants is None:
        tenants = sorted(set(await tenants_of(source, None)) | set(await tenants_of(target, None)))
    return compare(await census(source, tenants), await census(target, tenants))
