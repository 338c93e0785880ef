"""What ``bridge-store gc`` asks of the runs and runEvents substores besides the contract.

``RunStore.tenants()`` and ``RunEventStore.tenants()`` list the tenants holding runs and
run events; ``RunEventStore.run_ids(tenant)`` pages through the ids of the runs that
have events. gc needs them to find events and runs whose owner is gone (in a tenant
that may have no agent left). Included in the runs and runEvents mixins.
"""

from __future__ import annotations

from .base import ConformanceBase
from .harness import StoreClient, run
from .tenants import OTHER


async def _run_ids(client: StoreClient, tenant: str) -> list[str]:
    found: list[str] = []
    async for page in client.stores.run_events.run_ids(tenant):
        found.extend(page)
    return found


class RunInventoryConformance(ConformanceBase):
    async def test_run_tenants_are_those_holding_runs(self, client: StoreClient) -> None:
        assert set(await client.stores.runs.tenants()) == set()
        await client.call("runs", "create", {"run": run("run-1")})
        other = client.as_tenant(OTHER)
        await other.call("runs", "create", {"run": run("run-1", "agent-9")})
        assert set(await client.stores.runs.tenants()) == {"default", OTHER}
        await other.call("runs", "delete", {"filter": {}})
        assert set(await client.stores.runs.tenants()) == {"default"}


class RunEventInventoryConformance(ConformanceBase):
    async def test_run_ids_are_the_runs_with_events_per_tenant(self, client: StoreClient) -> None:
        assert await _run_ids(client, "default") == []
        assert set(await client.stores.run_events.tenants()) == set()
        mine = [f"run-{number}" for number in range(25)] + ["run/ü 🚀", "run}:log"]
        for run_id in mine:
            await client.call("runEvents", "append", {"runId": run_id, "eventType": "x"})
        await client.call("runEvents", "append", {"runId": "run-0", "eventType": "again"})
        other = client.as_tenant(OTHER)
        await other.call("runEvents", "append", {"runId": "theirs", "eventType": "x"})
        listed = await _run_ids(client, "default")
        # At least once each (a store may page with duplicates), nothing else.
        assert set(listed) == set(mine)
        assert await _run_ids(client, OTHER) == ["theirs"]
        assert set(await client.stores.run_events.tenants()) == {"default", OTHER}
        await client.call("runEvents", "delete", {"filter": {"runIds": ["run-3", "run}:log"]}})
        assert set(await _run_ids(client, "default")) == set(mine) - {"run-3", "run}:log"}
        await other.call("runEvents", "delete", {"filter": {}})
        assert await _run_ids(client, OTHER) == []
        assert set(await client.stores.run_events.tenants()) == {"default"}
