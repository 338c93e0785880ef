"""Times CallStore accepts that name no calendar date, through every reader.

CallStore takes any integer within 2^53 of zero as a time: microseconds by mistake,
2^53, negative numbers, the year 10000. A page, an export or a command shows such a
time as the number stored ("out of range"), and the durations computed from it too;
none fails (``bridge_store/viewer/times.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bridge_store.cli import main
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from bridge_store.viewer.times import (
    MAX_MS,
    MIN_MS,
    iso_time,
    shown_duration,
    shown_offset,
    shown_time,
)
from bridge_store.wire.fields import MAX_SAFE_INTEGER
from testkit.inprocess import running

from .support.history import T0, agent, message, run, text

TOKEN = "times-test-token-0123"
#: Microseconds by mistake (year 58375), the contract's bounds, the year 10000, the
#: calendar's last and first milliseconds and one beyond each.
ODD_TIMES = {
    "micros": T0 * 1000,
    "max": MAX_SAFE_INTEGER,
    "max-1": MAX_SAFE_INTEGER - 1,
    "min": -MAX_SAFE_INTEGER,
    "negative": -1,
    "y10000": MAX_MS + 1,
    "last": MAX_MS,
    "first": MIN_MS,
    "before": MIN_MS - 1,
}


def test_a_stored_time_is_shown_as_what_it_is() -> None:
    assert shown_time(T0) == "2026-05-28 20:26:40"
    assert shown_time(0) == "1970-01-01 00:00:00"
    assert shown_time(-1) == "1969-12-31 23:59:59"
    assert shown_time(MAX_MS) == "9999-12-31 23:59:59"
    assert shown_time(MIN_MS) == "0001-01-01 00:00:00"
    assert shown_time(MAX_MS + 1) == f"{MAX_MS + 1} (out of range)"
    assert shown_time(MAX_SAFE_INTEGER) == "9007199254740992 (out of range)"
    assert shown_time(-MAX_SAFE_INTEGER) == "-9007199254740992 (out of range)"
    assert shown_time(T0 * 1000) == "1780000000000000 (out of range)"
    assert shown_time(None) == shown_time("soon") == shown_time(True) == shown_time(1.5) == "-"
    assert iso_time(T0) == "2026-05-28T20:26:40+00:00"
    assert iso_time(MAX_MS + 1) == iso_time(None) == ""


def test_a_duration_is_shown_as_what_it_is() -> None:
    assert shown_duration(1200) == "1.2 s"
    assert shown_duration(184_000) == "3 min 4 s"
    assert shown_duration(5 * 3_600_000 + 6 * 60_000) == "5 h 6 min"
    assert shown_duration(-5) == "-5 ms (out of range)"
    assert shown_duration(2 * MAX_SAFE_INTEGER) == "18014398509481984 ms (out of range)"
    assert shown_duration(10**30) == f"{10**30} ms (out of range)"
    assert shown_duration(None) == shown_duration(False) == "-"
    assert shown_offset(T0 + 1200, T0) == "+1.2 s"
    assert shown_offset(T0 - 1200, T0) == "-1.2 s"
    # From a start that names no date, the moment itself.
    assert shown_offset(T0, MAX_SAFE_INTEGER) == "2026-05-28 20:26:40 UTC"
    assert shown_offset(MAX_SAFE_INTEGER, T0) == "9007199254740992 (out of range)"
    assert shown_offset(None, T0) == shown_offset(T0, None) == ""


def odd_calls() -> list[tuple[str, str, dict[str, object]]]:
    """An agent and a run for each odd time, in every time field, with a thinking block
    that took as long and a tool call; one agent with a run of each."""
    calls: list[tuple[str, str, dict[str, object]]] = []
    for name, at in ODD_TIMES.items():
        calls.append(
            (
                "agents",
                "create",
                {"agent": {**agent(f"a-{name}", name, "/w", "idle", at), "createdAt": at}},
            )
        )
        doc = run(f"a-{name}", f"r-{name}", 1, "finished", createdAt=at, updatedAt=at)
        doc.update(startedAt=at, endedAt=-at)
        calls.append(("runs", "create", {"run": doc}))
        for body in (
            {"type": "user", "message": {"content": [text(f"prompt {name}")]}},
            {"type": "thinking", "text": "hm", "thinking_duration_ms": at},
            {"type": "tool_call", "call_id": "c", "name": "grep", "status": "running"},
            {"type": "tool_call", "call_id": "c", "status": "completed", "result": "ok"},
        ):
            calls.append(("runEvents", "append", message(f"a-{name}", f"r-{name}", body)))
    return calls


def store_call(url: str, substore: str, method: str, data: object) -> httpx.Response:
    return httpx.post(
        url + CALL_STORE_PATH,
        json={"substore": substore, "method": method, "input": data},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )


@pytest.fixture(params=["sqlite", "memory"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A server holding :func:`odd_calls`: on SQLite (the run list from its index, the
    commands read the file too) and on memory (the run list by a scan)."""
    store = f"sqlite:///{tmp_path / 'times.db'}" if request.param == "sqlite" else "memory://"
    app = create_app(ServerConfig(routes=Routes.single(store), auth_token=TOKEN))
    with running(app, access_log=False) as url:
        for substore, method, data in odd_calls():
            response = store_call(url, substore, method, data)
            assert response.status_code == 200, response.text
        yield url


def test_every_page_shows_times_beyond_the_calendar(server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers) as client:
        pages = ["/ui/", "/ui/runs", "/ui/overview", "/ui/search?q=prompt"]
        pages += [f"/ui/runs?sort={sort}" for sort in ("newest", "duration", "tokens")]
        for name in ODD_TIMES:
            pages += [
                f"/ui/agent?id=a-{name}",
                f"/ui/run?agent=a-{name}&id=r-{name}",
                f"/ui/run?agent=a-{name}&id=r-{name}&format=fragment",
                f"/ui/outline?agent=a-{name}&id=r-{name}",
                f"/ui/events?agent=a-{name}&run=r-{name}",
                f"/ui/export/transcript.md?agent=a-{name}&run=r-{name}",
                f"/ui/export/run.jsonl?agent=a-{name}&run=r-{name}",
            ]
        for path in pages:
            for shape in ("", "&format=json" if "?" in path else "?format=json"):
                if "export" in path and shape:
                    continue
                answer = client.get(path + shape)
                assert answer.status_code == 200, (path + shape, answer.text[-300:])
        listed = client.get("/ui/runs").text
        assert f"{MAX_SAFE_INTEGER} (out of range)" in listed
        assert f"{T0 * 1000} (out of range)" in listed
        assert "9999-12-31 23:59:59" in listed
        page = client.get("/ui/agent?id=a-max").text
        assert f"{MAX_SAFE_INTEGER} (out of range)" in page
        # endedAt - startedAt: -2^54 ms.
        assert f"{-2 * MAX_SAFE_INTEGER} ms (out of range)" in page
        exported = client.get("/ui/export/transcript.md?agent=a-min&run=r-min").text
        assert f"- Created: {-MAX_SAFE_INTEGER} (out of range)" in exported
        assert f"### Thinking ({-MAX_SAFE_INTEGER} ms (out of range))" in exported
        # The JSON twin carries the numbers stored.
        data = client.get("/ui/run?agent=a-micros&id=r-micros&format=json").json()
        assert data["run"]["startedAt"] == T0 * 1000


def test_the_run_list_pages_through_durations_beyond_2_53(server: str) -> None:
    # endedAt - startedAt reaches 2^54 either way: the cursor of a page ending at
    # such a run is one the next page takes.
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, headers=headers) as client:
        for sort in ("duration", "newest", "tokens"):
            seen: list[str] = []
            cursor = ""
            while True:
                page = client.get(f"/ui/runs?sort={sort}&limit=1&format=json&cursor={cursor}")
                assert page.status_code == 200, (sort, page.text)
                seen += [row["runId"] for row in page.json()["runs"]]
                cursor = page.json()["next"]
                if cursor is None:
                    break
            assert sorted(seen) == sorted(f"r-{name}" for name in ODD_TIMES), sort


def test_the_commands_show_times_beyond_the_calendar(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'times.db'}"]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    remote = ["--store-callback-url", server, "--store-auth-token-file", str(token_file)]
    capsys.readouterr()
    for source in (store, remote) if (tmp_path / "times.db").exists() else (remote,):
        for argv in (
            ["agents"],
            ["runs"],
            ["runs", "--sort", "duration"],
            ["runs", "a-max"],
            ["overview"],
            ["transcript", "r-max"],
            ["transcript", "r-min", "--markdown"],
        ):
            assert main([*argv, *source]) == 0, argv
            out, err = capsys.readouterr()
            assert "Traceback" not in err, (argv, err)
        assert main(["runs", "a-max", *source]) == 0
        out = capsys.readouterr().out
        assert f"{MAX_SAFE_INTEGER} (out of range)" in out
        assert f"{-2 * MAX_SAFE_INTEGER} ms (out of range)" in out
        assert main(["transcript", "r-max", *source]) == 0
        assert f"thinking ({MAX_SAFE_INTEGER} ms (out of range))" in capsys.readouterr().out
