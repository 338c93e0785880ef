"""Writing the sample history into a store, never over history of someone's own.

The items go through :class:`~bridge_store.lifecycle.sink.StoreSink`, as ``import``
writes an archive: checked as CallStore calls would be, events restored with their
seqs and times, and every agent and run with its creator. A store that already holds
history is written to only when asked (``force``); one that holds this very sample
(same seed) is left as it is, so starting the demo again serves what it wrote before,
or written again when a first start was stopped midway.
"""

from __future__ import annotations

import enum

from ..errors import ConfigurationError
from ..lifecycle.sink import StoreSink
from ..lifecycle.tally import Tally
from ..stack.stores import Stores
from .history import SampleAgent, SampleHistory


class Filled(enum.Enum):
    """What :func:`fill` did."""

    WRITTEN = "written"
    #: The store held a sample write stopped midway (Ctrl-C), and it was written again.
    COMPLETED = "completed"
    #: The store held this sample already and was left alone.
    KEPT = "kept"


async def holds_history(stores: Stores) -> bool:
    """Whether any tenant holds agents or checkpoint blobs."""
    return bool(await stores.agents.tenants()) or bool(await stores.checkpoints.tenants())


async def holds_agent(stores: Stores, agent: SampleAgent) -> bool:
    return await stores.agents.get(agent.tenant, agent.agent_id) is not None


async def fill(stores: Stores, sample: SampleHistory, *, where: str, force: bool) -> Filled:
    """Write ``sample`` into ``stores`` (opened; ``where`` names them in a refusal).

    A store holding history is refused (ConfigurationError, one line) unless it is
    this sample's (its first agent is there: each agent is written after its runs,
    events and blob, in order): whole, it is kept; stopped midway (its last agent
    missing), the sample is written again over it. With ``force`` the sample is
    written into any store, its own items replaced and everything else left as it is.
    """
    if force or not await holds_history(stores):
        await write(stores, sample, replace=force)
        return Filled.WRITTEN
    if await holds_agent(stores, sample.agents[0]):
        if await holds_agent(stores, sample.agents[-1]):
            return Filled.KEPT
        await write(stores, sample, replace=True)
        return Filled.COMPLETED
    raise ConfigurationError(
        f"{where} already holds history; the demo writes only into a new or empty store: "
        "give another --store, or --force to add the sample to it"
    )


async def write(stores: Stores, sample: SampleHistory, *, replace: bool = False) -> Tally:
    """Write every item of ``sample``; ``replace`` rewrites items held differently."""
    sink = StoreSink(stores, overwrite=replace)
    for item in sample.items():
        await sink.write(item)
    return sink.tally
