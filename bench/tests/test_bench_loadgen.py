"""bench/loadgen.py: the wrk script sends the mix's requests; its results are read right."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from bench import mix
from bench.load_checks import audit, preflight, seed
from bench.loadgen import LoadResult, _lua_string, lua_script, parse_output, run_wrk
from bridge_store.server.app import create_app
from bridge_store.server.config import ServerConfig
from bridge_store.stack.stores import Routes
from testkit.callstore import CallStoreClient
from testkit.inprocess import running

TOKEN = "bench-test-token"
needs_wrk = pytest.mark.skipif(shutil.which("wrk") is None, reason="apt-get install -y wrk")

WRK_OUTPUT = """\
Running 10s test @ http://127.0.0.1:41233/sdk.v1.SdkStoreCallbackService/CallStore
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.12ms    1.20ms  40.11ms   90.00%
    Req/Sec     3.13k   120.00     3.40k    70.00%
  31234 requests in 10.00s, 20.11MB read
  Non-2xx or 3xx responses: 12
Requests/sec:   3123.40
Transfer/sec:      2.01MB
BENCH_RESULT {"requests": 31234, "duration_us": 10000412, "bytes": 21086912, \
"errors": {"connect": 0, "read": 1, "write": 0, "status": 12, "timeout": 0}, \
"latency_us": {"min": 310, "mean": 5120.4, "max": 40110, "50": 4870, "90": 6210, \
"99": 9870, "99.9": 20110}, "sent": {"runEvents.append": 15617, "agents.get": 3748}, \
"appended": {"run-a": 7808, "run-b": 7809}}
"""


def test_parse_output_reads_the_result_line() -> None:
    result = parse_output(WRK_OUTPUT)
    assert result.requests == 31234
    assert result.ops_per_second == pytest.approx(3123.27, abs=0.01)
    assert result.errors == {"connect": 0, "read": 1, "write": 0, "status": 12, "timeout": 0}
    assert result.error_count == 13
    assert result.latency_ms == {
        "min": 0.31,
        "mean": 5.12,
        "max": 40.11,
        "p50": 4.87,
        "p90": 6.21,
        "p99": 9.87,
        "p99.9": 20.11,
    }
    assert result.sent["runEvents.append"] == 15617
    assert result.appended == {"run-a": 7808, "run-b": 7809}


def test_parse_output_without_a_result_line_fails() -> None:
    with pytest.raises(ValueError, match="no result line"):
        parse_output("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_lua_strings_survive_any_brackets() -> None:
    assert _lua_string('{"a":"b"}') == '[[{"a":"b"}]]'
    assert _lua_string("x]]y") == "[=[x]]y]=]"
    assert _lua_string("x]]y]=]") == "[==[x]]y]=]]==]"


def test_lua_script_refuses_values_it_cannot_embed() -> None:
    ops = mix.operations("agents.get")
    pools = {"agents": [{"AGENT": 'agent-"quoted"'}], "blobs": [], "active": []}
    with pytest.raises(ValueError, match="cannot go into the wrk script"):
        lua_script(ops, mix.schedule(ops), pools, token=TOKEN, tag="00000000", threads=1)


def _expected_bodies(
    ops: Sequence[mix.Operation],
    order: Sequence[int],
    pools: Mapping[str, Sequence[mix.Record]],
    tag: str,
    count: int,
) -> list[Any]:
    """What the Lua script sends first on one connection, computed in Python."""
    picks: dict[str, int] = {}
    appended: dict[str, int] = {}
    bodies = []
    for counter in range(1, count + 1):
        op = ops[order[(counter - 1) % len(order)]]
        pick = picks.get(op.key, 0)
        picks[op.key] = pick + 1
        pool = pools[op.pool]
        record = pool[pick % len(pool)]
        run_appends = appended.get(record.get("RUN", ""), 0)
        values = {**mix.dynamic_values(record, counter, 0, tag, run_appends), **record}
        bodies.append(json.loads(op.template.render(values)))
        if op.appends:
            appended[record["RUN"]] = run_appends + 1
    return bodies


class Capture:
    """An ASGI app that keeps every request body and answers an empty CallStore output."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})


def _script(
    directory: Path, world: mix.World, ops: Sequence[mix.Operation], phase: str, tag: str
) -> tuple[Path, dict[str, list[mix.Record]]]:
    pools = {"agents": world.agents, "blobs": world.blobs, "active": world.active[phase]}
    script = directory / f"{phase}.lua"
    script.write_text(lua_script(ops, mix.schedule(ops), pools, token=TOKEN, tag=tag, threads=1))
    return script, pools


@needs_wrk
def test_wrk_sends_what_python_renders(tmp_path: Path) -> None:
    world = mix.build_world(active_runs=2)
    ops = mix.operations()
    script, pools = _script(tmp_path, world, ops, "timed", "00000002")
    capture = Capture()
    with running(capture) as url:
        result = run_wrk(url, script, connections=1, threads=1, duration=1)
    assert result.error_count == 0
    sent = [json.loads(body) for body in capture.bodies]
    assert len(sent) > 100
    assert sent[:100] == _expected_bodies(ops, mix.schedule(ops), pools, "00000002", 100)
    assert sum(result.appended.values()) == result.sent["runEvents.append"]


@needs_wrk
def test_wrk_realistic_mix_against_bridge_store_is_clean(tmp_path: Path) -> None:
    world = mix.build_world(active_runs=4)
    ops = mix.operations()
    app = create_app(ServerConfig(routes=Routes.single("memory://"), auth_token=TOKEN))
    with running(app) as url:
        client = CallStoreClient(url, TOKEN)
        seed(client, world)
        assert preflight(client, ops, world, is_store=True) == []
        script, _ = _script(tmp_path, world, ops, "timed", "00000002")
        result: LoadResult = run_wrk(url, script, connections=4, threads=1, duration=1)
        assert result.errors == {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
        assert result.requests > 50
        assert audit(client, world, ops, {"timed": result}, connections=4) == []
        client.close()
