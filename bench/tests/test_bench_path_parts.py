"""bench cpu-per-call --without-each: each part taken out removes that part's work only,
and the path is as served again afterwards."""

from __future__ import annotations

import pytest

from bench import cpu_per_call, path_parts
from bench.bytecodes import BytecodeCounter
from bench.cpu_per_call import measure
from bridge_store.rpc import connect
from bridge_store.server import app as app_module

CALLS = 60


def counted(without: frozenset[str]) -> BytecodeCounter:
    counter = BytecodeCounter()
    assert measure("memory", CALLS, counter, "realistic", without).failed == 0
    return counter


def test_each_part_out_runs_less_code_and_none_of_its_own() -> None:
    served = counted(frozenset())
    total = sum(served.bytecodes.values())
    # The functions only each part runs: none of them may run once it is out.
    own = {
        "observer": ("observe.py:CallObserver.finish", "metrics.py:MethodMetrics.record"),
        "metrics": ("metrics.py:MethodMetrics.record",),
        "auth": ("auth.py:token_digest",),
        "handler": ("dispatch.py:call_store", "app.py:BridgeStoreServer.handle"),
    }
    assert set(own) == set(path_parts.PARTS)
    for name in (function for functions in own.values() for function in functions):
        assert served.calls[name] >= CALLS, name
    totals = {}
    for part, functions in own.items():
        without = counted(frozenset({part}))
        for function in functions:
            assert without.calls[function] <= (1 if part == "auth" else 0), (part, function)
        totals[part] = sum(without.bytecodes.values())
        assert totals[part] < total, part
    # Every part out at once runs less than any one out; still the whole HTTP path.
    everything = counted(frozenset(path_parts.PARTS))
    assert sum(everything.bytecodes.values()) < min(totals.values())
    assert everything.calls["connect.py:CallStoreEndpoint.__call__"] == CALLS


def test_the_path_is_as_served_again_after_a_measurement() -> None:
    served = (app_module.BridgeStoreServer.endpoint, app_module.BridgeStoreServer.handle)
    bearer = connect.bearer_principal
    measure("memory", 5, without=frozenset(path_parts.PARTS))
    assert (app_module.BridgeStoreServer.endpoint, app_module.BridgeStoreServer.handle) == served
    assert connect.bearer_principal is bearer


def test_an_unknown_part_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown parts"), path_parts.taken_out(frozenset({"x"})):
        pass


def test_labels_name_what_was_taken_out() -> None:
    assert path_parts.label("memory", frozenset()) == "memory"
    assert path_parts.label("memory", frozenset({"auth"})) == "memory -auth"
    assert path_parts.label("memory", frozenset(path_parts.PARTS)) == "memory -all"
    variants = path_parts.each_part_out("sqlite")
    assert [path_parts.label(*v) for v in variants] == [
        "sqlite",
        *(f"sqlite -{part}" for part in path_parts.PARTS),
        "sqlite -all",
    ]


def test_without_each_needs_a_first_target_with_parts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cpu_per_call.main(["--targets", "ceiling,memory", "--without-each"])
    assert stopped.value.code == 2
    assert "not the ceiling" in capsys.readouterr().err
