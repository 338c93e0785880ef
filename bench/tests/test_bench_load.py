"""bench/load.py, its verdicts (bench/load_report.py) and bench/servers.py's ceiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from bench import mix
from bench.load import _arguments, measure_or_report
from bench.load_report import Row, judge, open_loop_table, table
from bench.loadgen import LoadResult
from bench.machine import cpu_seconds, settle
from bench.openloop import OpenLoopResult
from bench.servers import CEILING_RESPONSE, ceiling_app
from bridge_store.rpc.connect import CALL_STORE_PATH
from bridge_store.wire._codecs import MAX_DEPTH
from testkit import services
from testkit.inprocess import running

NO_ERRORS = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}


def _row(target: str, ops_per_s: float, p99: float = 5.0, cpu_s: float | None = None) -> Row:
    result = LoadResult(
        requests=int(ops_per_s * 10),
        duration_s=10.0,
        errors=dict(NO_ERRORS),
        latency_ms={"p50": 1.0, "p99": p99},
    )
    row = Row(target, timed=result)
    if cpu_s is not None:
        row.details["server_cpu_s"] = cpu_s
    return row


def _open(row: Row, rate: float, p99: float, cpu_s: float | None = None) -> Row:
    load = LoadResult(
        requests=int(rate * 10),
        duration_s=10.0,
        errors=dict(NO_ERRORS),
        latency_ms={"p50": 1.0, "p99": p99, "p99.9": p99 * 2, "max": p99 * 3},
    )
    row.open_loop = OpenLoopResult(
        rate=rate,
        load=load,
        service_ms={"p99": p99 / 2},
        send_lag_ms={"p99": 0.1},
        late_sends=0,
        generator_cpu_s=1.0,
    )
    if cpu_s is not None:
        row.details["open_server_cpu_s"] = cpu_s
    return row


def test_goals_pass_and_fail() -> None:
    rows = [
        _row("memory", 6000, cpu_s=9.6),
        _open(_row("sqlite", 7500), 3750, p99=4.0),
        _open(_row("postgres", 1500), 750, p99=6.0),
        _row("reference", 1000),
        _row("ceiling", 9000),
    ]
    judge(rows, connections=16)
    memory, sqlite, postgres, reference, ceiling = rows
    assert memory.ratios == {
        "vs_reference": 6.0,
        "vs_ceiling": pytest.approx(2 / 3),
        "cpu_vs_reference": None,
        "cpu_vs_ceiling": None,
    }
    assert [goal["met"] for goal in memory.goals] == [True]
    assert [goal["met"] for goal in sqlite.goals] == [True, True]
    assert [goal["met"] for goal in postgres.goals] == [False, False]
    assert reference.goals == ceiling.goals == []
    memory.details["load_average_before"] = (0.42, 0.3, 0.2)
    lines = table(rows).splitlines()
    assert lines[2].startswith("| memory | 6,000 | 1.00 | 5.00 | 0 | 0.160 | 6.00 | 0.67 | PASS: ")
    assert lines[2].endswith(" | 0.42 |")
    assert lines[3].endswith(
        "| 7.50 | 0.83 | PASS: >= 7,000 ops/s: 7,500 ok; open p99 < 5 ms: 4.0 ok | - |"
    )
    assert "FAIL: >= 3,000 ops/s: 1,500 FAIL; open p99 < 5 ms: 6.0 FAIL" in lines[4]
    assert lines[5].endswith("| 0 | - | 1.00 | 0.11 | - | - |")


def test_open_loop_table() -> None:
    rows = [_open(_row("redis", 6000), 3000, p99=2.0, cpu_s=6.0), _row("ceiling", 9000)]
    lines = open_loop_table(rows).splitlines()
    assert len(lines) == 3  # the ceiling had no open-loop run
    assert lines[2] == "| redis | 3,000 | 3,000 | 1.00 | 2.00 | 4.00 | 6.00 | 1.00 | 0.10 | 0.200 |"


def test_errors_fail_the_row_and_its_goals() -> None:
    broken = _row("redis", 9000)
    assert broken.timed is not None
    broken.timed.errors["status"] = 3
    broken.problems.append("timed run: 3 status errors (status = non-2xx answers)")
    rows = [broken, _row("reference", 1000), _row("ceiling", 9000)]
    judge(rows, connections=16)
    assert broken.ops_per_second is None
    assert broken.ratios["vs_reference"] is broken.ratios["vs_ceiling"] is None
    assert all(goal["met"] is False for goal in broken.goals)
    assert "| redis | 9,000 | 1.00 | 5.00 | 3 | - | - | - | FAIL (errors) |" in table(rows)


def test_cpu_ratios() -> None:
    rows = [_row("memory", 3000, cpu_s=7.5), _row("ceiling", 3500, cpu_s=7.0)]
    judge(rows, connections=16)
    # 0.25 ms/op against the ceiling's 0.2 ms/op.
    assert rows[0].ratios["cpu_vs_ceiling"] == pytest.approx(0.8)


def test_goals_without_a_comparison_or_elsewhere_are_unknown() -> None:
    rows = [_row("redis", 9000)]
    judge(rows, connections=16)
    assert [goal["met"] for goal in rows[0].goals] == [True, None]
    assert "n/a: >= 8,000 ops/s: 9,000 ok; open p99 < 5 ms: ? n/a" in table(rows)
    # Absolute goals hold for the realistic mix at 16 connections only.
    for connections, mix_name in ((4, "realistic"), (16, "append")):
        other = [_open(_row("redis", 9000), 4500, p99=1.0)]
        judge(other, connections=connections, mix=mix_name)
        assert [goal["met"] for goal in other[0].goals] == [None, None]


def test_a_target_that_cannot_start_fails_its_row_only(monkeypatch: pytest.MonkeyPatch) -> None:
    closed_port = services.free_port()
    monkeypatch.setattr(
        services, "POSTGRES_ADMIN_URL", f"postgresql://postgres@127.0.0.1:{closed_port}/postgres"
    )
    args = _arguments(["--targets", "postgres", "--settle", "0"])
    row = measure_or_report("postgres", mix.operations(), mix.build_world(1), args)
    assert not row.clean
    assert row.problems[0].startswith("could not run: ")
    assert "| postgres | - | - | - | 1 | - | - | - | FAIL (errors) |" in table([row])


def test_arguments() -> None:
    args = _arguments(["--targets", "memory, ceiling", "--mix", "append", "--duration", "5"])
    assert args.targets == ["memory", "ceiling"]
    assert (args.mix, args.duration, args.warmup, args.connections) == ("append", 5, 3, 16)
    assert (args.open_loop, args.open_rate, args.settle) == (0.5, 0.0, 1.0)
    assert _arguments(["--open-rate", "1000"]).open_rate == 1000.0
    for bad in (
        ["--targets", "mongo"],
        ["--threads", "32"],
        ["--mix", "everything"],
        ["--open-loop", "2"],
        ["--open-rate", "-1"],
        ["--open-rate", "1000", "--open-loop", "0"],
        ["--settle", "-1"],
    ):
        with pytest.raises(SystemExit):
            _arguments(bad)


def test_ceiling_parses_the_body_and_answers_a_fixed_response() -> None:
    with running(ceiling_app()) as url, httpx.Client(base_url=url) as client:
        call = {"substore": "agents", "method": "get", "input": {"agentId": "a"}}
        response = client.post(CALL_STORE_PATH, content=json.dumps(call))
        assert response.status_code == 200
        assert response.content == CEILING_RESPONSE
        assert json.loads(CEILING_RESPONSE)["output"]["seq"] == 1
        # It does parse, with the real path's codec: a body that is not JSON gets the
        # same Connect error, and so does one nested too deep.
        refused = client.post(CALL_STORE_PATH, content=b"{not json")
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid_argument")
        deep: dict[str, Any] = {"input": {}}
        for _ in range(MAX_DEPTH):
            deep = {"input": deep}
        assert client.post(CALL_STORE_PATH, content=json.dumps(deep)).status_code == 400
        assert client.get(CALL_STORE_PATH).status_code == 404


def test_server_cpu_counts_its_workers_too() -> None:
    # serve --workers N: the process the bench started is the parent; its workers
    # do the work.
    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.4\n"
        "while time.process_time() < end: pass\n"
        "sys.stdin.read()"
    )
    before = cpu_seconds(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while cpu_seconds(child.pid) < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cpu_seconds(os.getpid()) - before >= cpu_seconds(child.pid) >= 0.35
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)


def test_settle_waits_for_the_load_to_fall_and_no_longer_than_its_limit() -> None:
    readings = iter([2.1, 1.6, 1.2, 0.9, 0.5])
    slept: list[float] = []
    assert settle(1.0, load=lambda: next(readings), sleep=slept.append) == (15.0, 0.9)
    assert slept == [5.0, 5.0, 5.0]
    slept.clear()
    # A machine that stays busy: at most limit_s of waiting, the last step cut to fit.
    assert settle(1.0, limit_s=12, load=lambda: 1.8, sleep=slept.append) == (12.0, 1.8)
    assert slept == [5.0, 5.0, 2.0]
    # Quiet already: no wait at all.
    assert settle(1.0, load=lambda: 0.3, sleep=slept.append) == (0.0, 0.3)
