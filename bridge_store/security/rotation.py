"""Re-encrypting every sealed item under the current key (``bridge-store keys rotate``).

Walks every tenant's agents and checkpoint blobs straight on the backends (below the
sealing layer), and rewrites each item not yet sealed with the first key of the
keyring: items sealed with an older key and items stored before any key was set.
Items already under the current key are skipped, so a run that stopped half-way is
resumed by running it again, and a second run changes nothing.

Each item is read again right before it is rewritten, which keeps the window in which
a concurrent write by a serving server could be overwritten to one round trip; run it
while bridges are quiet to close it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backend.substores import AgentPosition, BlobRef, agent_position
from ..stack.stores import Stores
from ..wire.fields import MAX_LIMIT
from .encryption import Identity, Keyring
from .sealed_stores import METADATA, open_agent, seal_agent


@dataclass
class RotationReport:
    agents_rewritten: int = 0
    agents_current: int = 0
    blobs_rewritten: int = 0
    blobs_current: int = 0


async def rotate(stores: Stores, keyring: Keyring) -> RotationReport:
    """Seal every agent's sdkMetadata and every blob of every tenant with the current key."""
    report = RotationReport()
    for tenant in await stores.agents.tenants():
        await _rotate_agents(stores, keyring, tenant, report)
    for tenant in await stores.checkpoints.tenants():
        await _rotate_blobs(stores, keyring, tenant, report)
    return report


async def _rotate_agents(
    stores: Stores, keyring: Keyring, tenant: str, report: RotationReport
) -> None:
    after: AgentPosition | None = None
    while page := await stores.agents.list(tenant, cwd=None, after=after, limit=MAX_LIMIT):
        after = agent_position(page[-1])
        for listed in page:
            if METADATA not in listed or keyring.metadata_is_current(listed[METADATA]):
                report.agents_current += 1
                continue
            fresh = await stores.agents.get(tenant, listed["agentId"])
            if fresh is None:
                continue  # deleted meanwhile
            plain = open_agent(keyring, tenant, fresh)
            await stores.agents.update(tenant, seal_agent(keyring, tenant, plain))
            report.agents_rewritten += 1


async def _rotate_blobs(
    stores: Stores, keyring: Keyring, tenant: str, report: RotationReport
) -> None:
    after: BlobRef | None = None
    while refs := await stores.checkpoints.list(
        tenant, agent_ids=None, blob_ids=None, after=after, limit=MAX_LIMIT
    ):
        after = refs[-1]
        for ref in refs:
            stored = await stores.checkpoints.get(tenant, ref.agent_id, ref.blob_id)
            if stored is None:
                continue
            if keyring.blob_is_current(stored):
                report.blobs_current += 1
                continue
            identity = Identity(tenant, ref.agent_id, ref.blob_id)
            sealed = keyring.seal_blob(keyring.open_blob(stored, identity), identity)
            await stores.checkpoints.update(tenant, ref.agent_id, ref.blob_id, sealed)
            report.blobs_rewritten += 1
