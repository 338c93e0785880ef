"""Whether a store already holds sealed items: a writer without the key must not add
plaintext beside them.

A store keeps one regime: once a key seals its secrets, everything written into it is
sealed too. A tool writing without the key (``import``, ``import-local``, ``copy``
not given it) would put blobEncryptionKeys in the clear next to sealed ones, so it
looks first. The newest agents of each tenant come first in list order, so sealing
turned on at any time shows in the first page; one blob per tenant is looked at too.
"""

from __future__ import annotations

from ..stack.stores import Stores
from .encryption import is_sealed_blob, is_sealed_metadata

#: The agents looked at per tenant: the newest ones, which a key in use has sealed.
AGENTS_LOOKED_AT = 20


async def holds_sealed_items(stores: Stores) -> bool:
    """Whether any agent's sdkMetadata or checkpoint blob the store holds is sealed
    (looking at the newest agents and the first blob of each tenant)."""
    for tenant in await stores.agents.tenants():
        agents = await stores.agents.list(tenant, cwd=None, after=None, limit=AGENTS_LOOKED_AT)
        if any(is_sealed_metadata(agent.get("sdkMetadata")) for agent in agents):
            return True
    for tenant in await stores.checkpoints.tenants():
        refs = await stores.checkpoints.list(
            tenant, agent_ids=None, blob_ids=None, after=None, limit=1
        )
        for ref in refs:
            blob = await stores.checkpoints.get(tenant, ref.agent_id, ref.blob_id)
            if blob is not None and is_sealed_blob(blob):
                return True
    return False
