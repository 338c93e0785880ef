"""Copying history from one opened store into another (``bridge-store copy``).

Agents are copied a few at a time (:data:`WORKERS`), each agent's items in the
order :mod:`.walk` gives them, through a :class:`~.sink.StoreSink`: rerunning a copy
after an interruption skips what was copied and finishes the rest. Memory stays
bounded by the workers' pages and one blob each, plus one flag per agent copied.

Agents updated during the copy are walked a second time (:mod:`.walk` says why). One
the first pass copied whole is then written ``again`` (see :mod:`.sink`): its newer
items replace the ones this copy wrote, and only items new since are counted, so the
summary counts each item once, as ``--verify`` does. One the first pass left partly
alone (it differs in the target) is not walked again: its differences are reported
once, and a rerun brings what it gained meanwhile.

Who created each agent and run (the token name recorded beside it) is copied with it,
so the target's viewer shows the same "created by".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from bridge_store.stack.stores import Stores
from bridge_store.types import Document

from .sink import StoreSink
from .tally import Tally
from .walk import agent_items, agents_of, agents_updated_since, tenants_of, walk_started

#: Agents copied at once: enough to overlap the round trips to both stores.
WORKERS = 4


async def copy_history(
    source: Stores,
    target: Stores,
    *,
    tenants: Sequence[str] | None,
    overwrite: bool,
    tally: Tally | None = None,
    on_agent: Callable[[], None] | None = None,
) -> Tally:
    """Copy the tenants' history (default: every tenant of ``source``); ``on_agent`` is
    called after each agent is copied."""
    sink = StoreSink(target, overwrite=overwrite, tally=tally)
    queue: asyncio.Queue[tuple[str, Document] | None] = asyncio.Queue(maxsize=WORKERS * 2)
    #: (tenant, agentId) of each agent copied, and whether it was copied whole.
    copied: dict[tuple[str, str], bool] = {}

    async def produce() -> None:
        chosen = await tenants_of(source, tenants)
        started = walk_started()
        for tenant in chosen:
            async for agent in agents_of(source, tenant):
                await queue.put((tenant, agent))
        # The second look only once the first pass is written, so that no agent is
        # copied by two workers at once.
        await queue.join()
        for tenant in chosen:
            async for agent in agents_updated_since(source, tenant, started):
                await queue.put((tenant, agent))
        for _ in range(WORKERS):
            await queue.put(None)

    async def work() -> None:
        while (job := await queue.get()) is not None:
            tenant, agent = job
            key = (tenant, agent["agentId"])
            whole = copied.get(key)
            if whole is not False:
                await copy_agent(tenant, agent, again=whole is not None)
            queue.task_done()

    async def copy_agent(tenant: str, agent: Document, *, again: bool) -> None:
        left_alone = False
        async for item in agent_items(source, tenant, agent, creators=True):
            left_alone |= await sink.write(item, again=again)
        if not again:
            copied[(tenant, agent["agentId"])] = not left_alone
            if on_agent is not None:
                on_agent()

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(produce())
            for _ in range(WORKERS):
                group.create_task(work())
    except* Exception as failed:
        # The first failure (an outage, typically) stopped the others: report it as
        # itself, so the command names it in one line.
        raise failed.exceptions[0] from None
    return sink.tally
