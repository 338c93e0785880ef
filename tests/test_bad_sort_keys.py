"""A document with ``updatedAt: "yesterday"`` (or a turn that is no integer) broke its
tenant's paging for good (issue 21). Every way in now refuses it; a row written before
that (SQLite kept it as given) no longer stops a listing, and copy and export refuse
to carry it on, in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.cli import main
from bridge_store.errors import Code, ConnectError
from bridge_store.rpc.dispatch import call_store
from bridge_store.security.auth import local_principal
from bridge_store.stack.stores import Routes, Stores, open_stores
from bridge_store.types import Document

GOOD_AGENTS = [f"agent-{n}" for n in range(6)]
#: What imports wrote before they were checked, and SQLite kept as given.
BAD_UPDATED_AT: dict[str, Any] = {
    "text": "yesterday",
    "float": 1_700_000_000_002.5,
    "beyond 2**53": 10**17,
    "below -2**53": -(10**17),
}
BAD_TURNS: dict[str, Any] = {"text": "two", "float": 2.5, "beyond 2**53": 10**17}


async def _seeded(path: Path) -> Any:
    """A SQLite store with good agents and runs, and bad ones written as an unchecked
    import wrote them: through the backend API, past every check."""
    opened = await open_stores(
        get_plugin_manager(), Routes.single(f"sqlite:///{path}"), migrate=True
    )
    stores = opened.stores
    for number, agent_id in enumerate(GOOD_AGENTS):
        updated_at = 1_700_000_000_000 + number
        await stores.agents.create(
            "default", {"agentId": agent_id, "cwd": "/w", "updatedAt": updated_at}
        )
        await stores.runs.create(
            "default", {"runId": f"run-{number}", "agentId": agent_id, "turnNumber": number}
        )
    for name, value in BAD_UPDATED_AT.items():
        await stores.agents.create(
            "default", {"agentId": f"bad {name}", "cwd": "/w", "updatedAt": value}
        )
    for name, value in BAD_TURNS.items():
        run = {"runId": f"bad {name}", "agentId": "agent-0", "turnNumber": value}
        await stores.runs.create("default", run)
    return opened


async def _list_all(stores: Stores, substore: str, limit: int) -> list[Document]:
    """Every page of a CallStore list, as a bridge pages through it."""
    items: list[Document] = []
    filter_: Document = {"limit": limit}
    for _ in range(100):  # far more pages than there are items: a loop would show
        output, _ = await call_store(
            stores, substore, "list", {"filter": filter_}, principal=local_principal()
        )
        assert output is not None
        items += output["items"]
        if "nextCursor" not in output:
            return items
        filter_ = {"limit": limit, "cursor": output["nextCursor"]}
    raise AssertionError(f"{substore} paging did not end")


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_rows_with_bad_sort_keys_do_not_break_paging(tmp_path: Path, limit: int) -> None:
    opened = await _seeded(tmp_path / "store.db")
    agents = [agent["agentId"] for agent in await _list_all(opened.stores, "agents", limit)]
    assert set(GOOD_AGENTS) <= set(agents)
    assert len(agents) == len(set(agents))  # no row twice
    runs = [run["runId"] for run in await _list_all(opened.stores, "runs", limit)]
    assert {f"run-{n}" for n in range(len(GOOD_AGENTS))} <= set(runs)
    assert len(runs) == len(set(runs))
    await opened.close()


@pytest.mark.parametrize("value", ["yesterday", 1.5, 10**17, None, [1]])
async def test_callstore_refuses_a_bad_updated_at_on_create_and_update(value: Any) -> None:
    opened = await open_stores(get_plugin_manager(), Routes.single("memory://"), migrate=True)
    agent = {"agentId": "a", "cwd": "/w", "updatedAt": value}
    for method in ("create", "update"):
        with pytest.raises(ConnectError) as refused:
            await call_store(
                opened.stores, "agents", method, {"agent": agent}, principal=local_principal()
            )
        assert refused.value.code == Code.INVALID_ARGUMENT
        assert "input.agent.updatedAt must be an integer" in refused.value.message
    await opened.close()


@pytest.mark.parametrize("command", ["copy", "export"])
def test_copy_and_export_refuse_a_stored_bad_document_in_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    async def seed() -> None:
        await (await _seeded(tmp_path / "source.db")).close()

    asyncio.run(seed())
    source = f"sqlite:///{tmp_path / 'source.db'}"
    if command == "copy":
        arguments = ["copy", "--from", source, "--to", f"sqlite:///{tmp_path / 'target.db'}"]
    else:
        arguments = ["export", "--store", source, "--output", str(tmp_path / "out.tar.gz")]
    assert main(arguments) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("bridge-store: refused ")
    assert "must be an integer" in lines[0]
