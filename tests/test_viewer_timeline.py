"""A run's timeline: each block's time from the start, each tool call's duration (from
its events' times), the outline of a long run with its first error and end jumps, and
the header a followed run keeps current."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bridge_store.backend.plugins import get_plugin_manager
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes, open_stores
from bridge_store.viewer.transcript import TranscriptBuilder
from testkit.inprocess import running

from .support.history import T0, agent, finished_run_messages, message, run

TOKEN = "timeline-token"
AGENT, RUN = "agent-t", "run-t"
START = T0 + 60_000
#: Seconds after the start each message of finished_run_messages() was stored at.
SECONDS = [0.1, 0.2, 1, 2, 2.5, 3.5, 4, 4.2, 5, 5, 8.4, 9, 12, 12.5, 13, 14, 15]


def timed(bodies: list[dict[str, Any]], seconds: list[float]) -> list[dict[str, Any]]:
    """Stored events of RUN, each created at START plus its seconds."""
    return [
        {
            "seq": seq,
            "offset": str(seq),
            **message(AGENT, RUN, body),
            "idempotencyKey": None,
            "payloadRef": None,
            "createdAt": START + int(at * 1000),
        }
        for seq, (body, at) in enumerate(zip(bodies, seconds, strict=True), start=1)
    ]


def test_blocks_carry_their_time_and_tool_calls_their_duration() -> None:
    blocks = TranscriptBuilder().extend(timed(finished_run_messages(), SECONDS)).json()
    by_kind = {block["kind"]: block for block in reversed(blocks)}
    assert by_kind["user"]["at"] == START + 1000
    # Deltas joined: a block's time is its first event's.
    assert by_kind["thinking"]["at"] == START + 2000
    read, test = [block for block in blocks if block["kind"] == "tool_call"]
    # From the model's tool_use (5 s) to the completed event (8.4 s).
    assert (read["at"], read["endedAt"], read["durationMs"]) == (
        START + 5000,
        START + 8400,
        3400,
    )
    # A call whose only event is its error: it began and ended there.
    assert (test["at"], test["durationMs"]) == (START + 9000, 0)
    running_only = TranscriptBuilder().extend(timed(finished_run_messages()[:10], SECONDS[:10]))
    [unfinished] = [b for b in running_only.json() if b["kind"] == "tool_call"]
    assert (unfinished["at"], unfinished["durationMs"]) == (START + 5000, None)


async def restore(url: str) -> None:
    """A run whose events have the times above, stored as a copy stores them."""
    opened = await open_stores(get_plugin_manager(), Routes.single(url), migrate=True)
    try:
        stores = opened.stores
        await stores.agents.create("default", agent(AGENT, "timed", "/w", "idle", T0))
        await stores.runs.create(
            "default", run(AGENT, RUN, 1, "error", startedAt=START, endedAt=START + 15_000)
        )
        bodies = [*finished_run_messages()[:-1], {"type": "status", "status": "ERROR"}]
        await stores.run_events.restore("default", RUN, timed(bodies, SECONDS))
    finally:
        await opened.close()


@pytest.fixture
def server(tmp_path: Any) -> Iterator[httpx.Client]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    asyncio.run(restore(url))
    app = create_app(ServerConfig(routes=Routes.single(url), auth_token=TOKEN))
    with (
        running(app) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
    ):
        yield client


def test_the_transcript_shows_times_from_the_start_and_tool_durations(
    server: httpx.Client,
) -> None:
    page = server.get(f"/ui/run?agent={AGENT}&id={RUN}")
    assert page.status_code == 200
    assert ">+1.0 s</time>" in page.text  # the prompt
    assert ">+15.0 s</time>" in page.text  # the final status
    assert "took 3.4 s" in page.text
    assert 'id="b-call-call-read"' in page.text
    data = server.get(f"/ui/run?agent={AGENT}&id={RUN}&format=json").json()
    assert data["start"] == START
    assert data["elapsedMs"] is None  # ended: its duration is the run's own
    assert "15.0 s" in page.text


def test_the_outline_lists_every_step_and_jumps_to_the_first_error_and_the_end(
    server: httpx.Client,
) -> None:
    data = server.get(f"/ui/outline?agent={AGENT}&id={RUN}&format=json").json()
    labels = [step["label"] for step in data["steps"]]
    assert labels[0] == "Status RUNNING"
    assert "Prompt: Fix the login redirect" in labels
    assert "read_file (completed, 3.4 s)" in labels
    assert data["firstError"]["label"] == "run_terminal_cmd (error, 0.0 s)"
    assert data["end"]["label"] == "Status ERROR"
    assert all(step["kind"] not in ("thinking", "request") for step in data["steps"])
    page = server.get(f"/ui/outline?agent={AGENT}&id={RUN}")
    first_error = data["firstError"]
    after = first_error["seq"] - 1
    link = f"/ui/run?agent={AGENT}&amp;id={RUN}&amp;after={after}#b-{first_error['key']}"
    assert f'<a href="{link}">First error</a>' in page.text
    assert ">End</a>" in page.text
    # The link opens the transcript at that step.
    jumped = server.get(link.replace("&amp;", "&").split("#")[0] + "&format=json").json()
    assert jumped["blocks"][0]["key"] == first_error["key"]
    assert server.get(f"/ui/outline?agent={AGENT}&id=nope").status_code == 404


def store_call(server: httpx.Client, substore: str, method: str, data: Any) -> None:
    response = httpx.post(
        str(server.base_url).rstrip("/") + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200, response.text


def test_a_followed_run_s_header_is_sent_with_each_poll(server: httpx.Client) -> None:
    live = run(AGENT, "run-live", 2, "running", startedAt=START)
    store_call(server, "runs", "create", {"run": live})
    fragment = server.get(f"/ui/run?agent={AGENT}&id=run-live&format=fragment").json()
    assert fragment["header"]["duration"].endswith(" so far")
    assert fragment["header"]["usageHtml"] is None
    usage = {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 7}}
    store_call(server, "runEvents", "append", message(AGENT, "run-live", usage))
    polled = server.get(f"/ui/run?agent={AGENT}&id=run-live&format=fragment").json()
    assert "<td>7</td>" in polled["header"]["usageHtml"]
    ended = {**live, "status": "finished", "endedAt": START + 61_000}
    store_call(server, "runs", "update", {"run": ended})
    final = server.get(f"/ui/run?agent={AGENT}&id=run-live&format=fragment").json()
    assert final["header"]["duration"] == "1 min 1 s"
    assert final["live"] is False
