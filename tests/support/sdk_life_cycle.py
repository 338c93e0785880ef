"""An agent's life cycle through one ``cursor-sdk`` version's own Python client.

Run by the Python of a venv holding that version (tests/support/sdk_versions.py), so
it imports nothing but the standard library and ``cursor_sdk``, and uses only client
calls every tested version has. The bridge is already running; argv[1] is JSON with
its ``url`` and ``authToken``, the ``workspace``, ``model`` and ``apiKey``.

After each step it prints one JSON line, ``{"step": NAME, ...what it saw}``, and
waits for a line on stdin before going on, so the test can check the store in
between. An exception ends it with ``{"step": "failed", "error": ...}``.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import cursor_sdk


def listed(page: Any) -> Iterator[Any]:
    """Every item of a list, following its pages (``auto_paging_iter`` is newer)."""
    while True:
        yield from page.items
        if not page.has_next_page():
            return
        page = page.get_next_page()


def report(step: str, **seen: Any) -> None:
    print(json.dumps({"step": step, **seen}), flush=True)
    if sys.stdin.readline() == "":
        raise SystemExit("the test went away")


def life_cycle(settings: dict[str, Any]) -> None:
    options = {
        "model": settings["model"],
        "api_key": settings["apiKey"],
        "local": {"cwd": settings["workspace"], "store": {"type": "custom"}},
    }
    with cursor_sdk.Client(
        base_url=settings["url"],
        auth_token=settings["authToken"],
        allow_api_key_env_fallback=True,
    ) as client:
        first = client.agents.create(options, name="first")
        second = client.agents.create(options, name="second")
        report("created", first=first.agent_id, second=second.agent_id)

        result = first.send("hello").wait()
        report("sent", runId=result.id, status=result.status)

        page = client.agents.list(limit=1)
        report(
            "listed",
            firstPage=[agent.agent_id for agent in page.items],
            hasNext=page.has_next_page(),
            all=[agent.agent_id for agent in listed(page)],
        )

        info = client.agents.get(first.agent_id)
        report("got", agentId=info.agent_id, name=info.name, cwd=info.cwd, status=info.status)

        runs = [run.id for run in listed(client.agents.list_runs(first.agent_id))]
        run = client.agents.get_run(result.id)
        events = [(event.kind, getattr(event, "offset", None)) for event in run.observe()]
        report(
            "runs",
            runs=runs,
            run={"id": run.id, "agentId": run.agent_id, "status": run.status},
            observed=events,
        )

        client.agents.archive(second.agent_id)
        report("archived", archived=client.agents.get(second.agent_id).archived)
        client.agents.unarchive(second.agent_id)
        report("unarchived", archived=client.agents.get(second.agent_id).archived)

        ran = second.send("hello").wait()
        report("second sent", runId=ran.id, status=ran.status)
        second.close()
        resumed = client.agents.resume(second.agent_id, options)
        again = resumed.send("again").wait()
        report("resumed", agentId=resumed.agent_id, runId=again.id, status=again.status)

        client.agents.delete(first.agent_id)
        report("deleted", remaining=[agent.agent_id for agent in listed(client.agents.list())])


def main() -> None:
    try:
        life_cycle(json.loads(sys.argv[1]))
    except Exception as error:
        print(
            json.dumps({"step": "failed", "error": f"{error!r}\n{traceback.format_exc()}"}),
            flush=True,
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
