"""Writing the sample history into a store, never over history of someone's own.

The items go through :class:`~bridge_store.lifecycle.sink.StoreSink`, as ``import``
writes an archive: checked as CallStore calls would be, events restored with their
seqs and times, and every agent and run with its creator. A store that already holds
history is written to only when asked (``force``); one that holds this very sample
(its first agent, same seed) is left as it is, so starting the demo again serves what
it wrote before.
"""

from __future__ import annotations

import enum

from ..errors import ConfigurationError
from ..lifecycle.sink import StoreSink
from ..lifecycle.tally import Tally
from ..stores import Stores
from .history import SampleHistory


class Filled(enum.Enum):
    """What :func:`fill` did."""

    WRITTEN = "written"
    #: The store held this sample already and was left alone.
    KEPT = "kept"


async def holds_history(stores: Stores) -> bool:
    """Whether any tenant holds agents or checkpoint blobs."""
    return bool(await stores.agents.tenants()) or bool(await stores.checkpoints.tenants())


async def holds_sample(stores: Stores, sample: SampleHistory) -> bool:
    first = sample.agents[0]
    return await stores.agents.get(first.tenant, first.agent_id) is not None


async def fill(stores: Stores, sample: SampleHistory, *, where: str, force: bool) -> Filled:
    """Write ``sample`` into ``stores`` (opened; ``where`` names them in a refusal).

    A store holding history is refused (ConfigurationError, one line) unless it holds
    this sample, which is kept, or ``force`` says to write into it anyway: then the
    sample's own items are replaced and everything else is left as it is.
    """
    if not force and await holds_history(stores):
        if await holds_sample(stores, sample):
            return Filled.KEPT
        raise ConfigurationError(
            f"{where} already holds history; the demo writes only into a new or empty store: "
            "give another --store, or --force to add the sample to it"
        )
    await write(stores, sample, replace=force)
    return Filled.WRITTEN


async def write(stores: Stores, sample: SampleHistory, *, replace: bool = False) -> Tally:
    """Write every item of ``sample``; ``replace`` rewrites items held differently."""
    sink = StoreSink(stores, overwrite=replace)
    for item in sample.items():
        await sink.write(item)
    return sink.tally
