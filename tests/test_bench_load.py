"""bench/load.py's verdicts and bench/servers.py's ceiling."""

from __future__ import annotations

import json

import httpx
import pytest

from bench import mix, services
from bench.load import Row, _arguments, judge, measure_or_report, table
from bench.loadgen import LoadResult
from bench.servers import CEILING_RESPONSE, ceiling_app
from bridge_store.connect import CALL_STORE_PATH
from tests.support.inprocess import running

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


def test_goals_pass_and_fail_on_the_ratios() -> None:
    rows = [
        _row("memory", 6000, cpu_s=9.6),
        _row("sqlite", 1500),
        _row("postgres", 2500, p99=12.0),
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
    assert [goal["met"] for goal in memory.goals] == [True, True]
    assert [goal["met"] for goal in sqlite.goals] == [False]
    assert [goal["met"] for goal in postgres.goals] == [True, False]
    assert reference.goals == ceiling.goals == []
    lines = table(rows).splitlines()
    assert lines[2].startswith("| memory | 6,000 | 1.00 | 5.00 | 0 | 0.160 | 6.00 | 0.67 | PASS: ")
    assert "FAIL: >= 2x ref: 1.5x FAIL" in lines[3]
    assert "p99 < 10 ms: 12.0 FAIL" in lines[4]
    assert lines[5].endswith("| 0 | - | 1.00 | 0.11 | - |")


def test_errors_fail_the_row_and_its_goals() -> None:
    broken = _row("memory", 9000)
    assert broken.timed is not None
    broken.timed.errors["status"] = 3
    broken.problems.append("timed run: 3 status errors (status = non-2xx answers)")
    rows = [broken, _row("reference", 1000), _row("ceiling", 9000)]
    judge(rows, connections=16)
    assert broken.ops_per_second is None
    assert broken.ratios["vs_reference"] is broken.ratios["vs_ceiling"] is None
    assert all(goal["met"] is False for goal in broken.goals)
    assert "| memory | 9,000 | 1.00 | 5.00 | 3 | - | - | - | FAIL (errors) |" in table(rows)


def test_cpu_ratios() -> None:
    rows = [_row("memory", 3000, cpu_s=7.5), _row("ceiling", 3500, cpu_s=7.0)]
    judge(rows, connections=16)
    # 0.25 ms/op against the ceiling's 0.2 ms/op.
    assert rows[0].ratios["cpu_vs_ceiling"] == pytest.approx(0.8)


def test_goals_without_a_comparison_are_unknown() -> None:
    rows = [_row("redis", 3000)]
    judge(rows, connections=4)
    assert [goal["met"] for goal in rows[0].goals] == [None, None]
    assert "n/a: >= 2x ref: ? n/a; p99 < 10 ms: 5.0 n/a" in table(rows)


def test_a_target_that_cannot_start_fails_its_row_only(monkeypatch: pytest.MonkeyPatch) -> None:
    closed_port = services.free_port()
    monkeypatch.setattr(
        services, "POSTGRES_ADMIN_URL", f"postgresql://postgres@127.0.0.1:{closed_port}/postgres"
    )
    args = _arguments(["--targets", "postgres"])
    row = measure_or_report("postgres", mix.operations(), mix.build_world(1), args)
    assert not row.clean
    assert row.problems[0].startswith("could not run: ")
    assert "| postgres | - | - | - | 1 | - | - | - | FAIL (errors) |" in table([row])


def test_arguments() -> None:
    args = _arguments(["--targets", "memory, ceiling", "--mix", "append", "--duration", "5"])
    assert args.targets == ["memory", "ceiling"]
    assert (args.mix, args.duration, args.warmup, args.connections) == ("append", 5, 3, 16)
    for bad in (["--targets", "mongo"], ["--threads", "32"], ["--mix", "everything"]):
        with pytest.raises(SystemExit):
            _arguments(bad)


def test_ceiling_parses_the_body_and_answers_a_fixed_response() -> None:
    with running(ceiling_app()) as url, httpx.Client(base_url=url) as client:
        call = {"substore": "agents", "method": "get", "input": {"agentId": "a"}}
        response = client.post(CALL_STORE_PATH, content=json.dumps(call))
        assert response.status_code == 200
        assert response.content == CEILING_RESPONSE
        assert json.loads(CEILING_RESPONSE)["output"]["seq"] == 1
        # It does parse: a body that is not JSON is a server error.
        assert client.post(CALL_STORE_PATH, content=b"{not json").status_code == 500
