"""Workspaces on a backend: what it must do for checkouts of one repository to share.

The server translates agents' ``cwd`` above the backends (bridge_store/workspaces):
a backend only ever sees a workspace key (``workspace:github.com/org/app//web``) as a
``cwd`` and the path it was last worked in as one more document field. It must keep
both as given, filter by the key exactly (the root's key is not a prefix match of its
directories' keys), and keep workspaces of one tenant away from every other.
"""

from __future__ import annotations

from typing import Any

from bridge_store.workspaces import translate
from bridge_store.workspaces.paths import Checkout
from bridge_store.workspaces.translate import WORKED_IN

from .base import ConformanceBase
from .harness import StoreClient, agent, list_all
from .tenants import OTHER

APP = "github.com/org/app"
ALICE = Checkout(APP, "/home/alice/src/app")
BOB = Checkout(APP, "/Users/bob/work/app")


async def _as(client: StoreClient, checkout: Checkout, method: str, data: Any) -> Any:
    """A call as a bridge working in ``checkout`` makes it, translated as the server does."""
    output = await client.call(
        "agents", method, translate.inbound(checkout, "agents", method, data)
    )
    return translate.outbound(checkout, "agents", method, output)


class AgentWorkspaceConformance(ConformanceBase):
    """Workspace keys are kept, filtered exactly and kept within their tenant."""

    async def test_workspace_keys_are_kept_and_filtered_exactly(self, client: StoreClient) -> None:
        cwds = {
            "root": f"workspace:{APP}",
            "web": f"workspace:{APP}//web",
            "web-ui": f"workspace:{APP}//web/ui",
            "longer": "workspace:github.com/org/application",
        }
        for agent_id, cwd in cwds.items():
            doc = {**agent(agent_id, cwd=cwd), WORKED_IN: f"/home/a/{agent_id}"}
            assert await client.call("agents", "create", {"agent": doc}) == doc
        for agent_id, cwd in cwds.items():
            listed = await list_all(client, "agents", {"cwd": cwd, "limit": 1})
            assert [item["agentId"] for item in listed] == [agent_id]
            assert listed[0][WORKED_IN] == f"/home/a/{agent_id}"

    async def test_a_workspace_checkout_sees_another_checkouts_agents_in_its_paths(
        self, client: StoreClient
    ) -> None:
        made = agent("agent-1", cwd=ALICE.root + "/web")
        await _as(client, ALICE, "create", {"agent": made})
        listed = await _as(client, BOB, "list", {"filter": {"cwd": BOB.root + "/web"}})
        assert [(item["agentId"], item["cwd"]) for item in listed["items"]] == [
            ("agent-1", BOB.root + "/web")
        ]
        got = await _as(client, BOB, "get", {"agentId": "agent-1"})
        assert WORKED_IN not in got
        await _as(client, BOB, "update", {"agent": {**got, "status": "archived"}})
        stored = await client.call("agents", "get", {"agentId": "agent-1"})
        assert (stored["cwd"], stored[WORKED_IN]) == (f"workspace:{APP}//web", BOB.root + "/web")
        await _as(client, BOB, "delete", {"filter": {"cwd": BOB.root + "/web"}})
        assert await client.call("agents", "get", {"agentId": "agent-1"}) is None

    async def test_a_workspace_never_crosses_a_tenant(self, client: StoreClient) -> None:
        other = client.as_tenant(OTHER)
        await _as(client, ALICE, "create", {"agent": agent("mine", cwd=ALICE.root)})
        await _as(other, ALICE, "create", {"agent": agent("theirs", cwd=ALICE.root)})
        for caller, expected in ((client, "mine"), (other, "theirs")):
            listed = await _as(caller, BOB, "list", {"filter": {"cwd": BOB.root}})
            assert [item["agentId"] for item in listed["items"]] == [expected]
        await _as(other, BOB, "delete", {"filter": {"cwd": BOB.root}})
        assert await client.call("agents", "get", {"agentId": "mine"}) is not None
        assert await other.call("agents", "get", {"agentId": "theirs"}) is None
