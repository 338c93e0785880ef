"""``python -m bench load``'s rows, the targets they are judged against, and its tables.

Targets (issue 22, on the 2-core development machine, the realistic mix at 16
connections): Postgres at least 3,000 ops/s, SQLite 7,000, Redis 8,000; each with an
open-loop p99 under 5 ms (at a fixed 1,000 calls/s with ``--open-rate 1000``, and at
half its measured maximum by default). The memory backend at least 50% of the
ceiling measured in the same run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .loadgen import LoadResult
from .openloop import OpenLoopResult

#: Per target: (measure, threshold). "ops_per_s", "vs_reference" and "vs_ceiling" are
#: at least; "open_p99_ms" below.
GOALS: dict[str, list[tuple[str, float]]] = {
    "memory": [("vs_ceiling", 0.5)],
    "sqlite": [("ops_per_s", 7000.0), ("open_p99_ms", 5.0)],
    "postgres": [("ops_per_s", 3000.0), ("open_p99_ms", 5.0)],
    "redis": [("ops_per_s", 8000.0), ("open_p99_ms", 5.0)],
}
#: Absolute goals (ops/s, open-loop p99) are defined for this mix and concurrency only.
GOAL_MIX = "realistic"
GOAL_CONNECTIONS = 16
_ABSOLUTE = frozenset({"ops_per_s", "open_p99_ms"})


@dataclass
class Row:
    """One target's measurements and verdicts."""

    target: str
    timed: LoadResult | None = None
    warmup: LoadResult | None = None
    #: At a fixed rate, half the timed run's ops/s (``bench/openloop.py``).
    open_loop: OpenLoopResult | None = None
    problems: list[str] = field(default_factory=list)
    ratios: dict[str, float | None] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.problems and self.timed is not None

    @property
    def ops_per_second(self) -> float | None:
        return self.timed.ops_per_second if self.clean and self.timed else None

    @property
    def cpu_ms_per_op(self) -> float | None:
        """Server CPU per request: steadier than ops/s on a busy machine."""
        return _per_op(self.details.get("server_cpu_s"), self.timed)

    @property
    def open_cpu_ms_per_op(self) -> float | None:
        result = self.open_loop.load if self.open_loop else None
        return _per_op(self.details.get("open_server_cpu_s"), result)

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "clean": self.clean,
            "problems": self.problems,
            "timed": self.timed.as_json() if self.timed else None,
            "warmup": self.warmup.as_json() if self.warmup else None,
            "open_loop": self.open_loop.as_json() if self.open_loop else None,
            "ratios": self.ratios,
            "server_cpu_ms_per_op": self.cpu_ms_per_op,
            "open_loop_server_cpu_ms_per_op": self.open_cpu_ms_per_op,
            "goals": self.goals,
            **self.details,
        }


def _per_op(cpu_s: Any, result: LoadResult | None) -> float | None:
    if cpu_s is None or not result or not result.requests:
        return None
    return float(cpu_s) * 1000 / result.requests


def judge(rows: list[Row], *, connections: int, mix: str = GOAL_MIX) -> None:
    """Fill each row's ratios and goal verdicts (met: True, False, or None = unknown)."""
    by_target = {row.target: row for row in rows}
    for row in rows:
        for name in ("reference", "ceiling"):
            key = f"vs_{name}"
            other = by_target.get(name)
            ours, theirs = row.ops_per_second, other.ops_per_second if other else None
            row.ratios[key] = ours / theirs if ours and theirs else None
            # The same ratio from CPU per request, which other load on the machine
            # moves less (the backends' own servers' CPU is not counted).
            ours, theirs = row.cpu_ms_per_op, other.cpu_ms_per_op if other else None
            row.ratios[f"cpu_{key}"] = theirs / ours if ours and theirs else None
        for measure, threshold in GOALS.get(row.target, []):
            row.goals.append(_goal(row, measure, threshold, connections, mix))


def _goal(row: Row, measure: str, threshold: float, connections: int, mix: str) -> dict[str, Any]:
    goal: dict[str, Any] = {"measure": measure, "threshold": threshold}
    if measure == "open_p99_ms":
        open_loop = row.open_loop
        value = open_loop.load.latency_ms.get("p99") if open_loop else None
    elif measure == "ops_per_s":
        value = row.ops_per_second
    else:
        value = row.ratios[measure]
    goal["value"] = value
    if measure == "open_p99_ms":
        goal["met"] = None if value is None else value < threshold
    else:
        goal["met"] = None if value is None else value >= threshold
    if measure in _ABSOLUTE and (connections != GOAL_CONNECTIONS or mix != GOAL_MIX):
        goal["met"] = None
        goal["why"] = f"defined for the {GOAL_MIX} mix at {GOAL_CONNECTIONS} connections"
    if not row.clean:
        goal["met"] = False
        goal["why"] = "the row has errors"
    return goal


def _goal_text(goal: dict[str, Any]) -> str:
    value, threshold, measure = goal["value"], goal["threshold"], goal["measure"]
    if measure == "open_p99_ms":
        wanted = f"open p99 < {threshold:g} ms"
        shown = "?" if value is None else f"{value:.1f}"
    elif measure == "ops_per_s":
        wanted = f">= {threshold:,.0f} ops/s"
        shown = "?" if value is None else f"{value:,.0f}"
    elif measure == "vs_ceiling":
        wanted = f">= {threshold:.0%} ceiling"
        shown = "?" if value is None else f"{value:.0%}"
    else:
        wanted = f">= {threshold:g}x ref"
        shown = "?" if value is None else f"{value:.1f}x"
    verdict = {True: "ok", False: "FAIL", None: "n/a"}[goal["met"]]
    return f"{wanted}: {shown} {verdict}"


def _row_verdict(row: Row) -> str:
    if not row.clean:
        return "FAIL (errors)"
    if not row.goals:
        return "-"
    verdicts = {goal["met"] for goal in row.goals}
    overall = "FAIL" if False in verdicts else "n/a" if None in verdicts else "PASS"
    return f"{overall}: " + "; ".join(_goal_text(goal) for goal in row.goals)


def _ratio(row: Row, key: str) -> str:
    value = row.ratios.get(key)
    return "-" if value is None else f"{value:.2f}"


def table(rows: list[Row]) -> str:
    """The closed-loop (wrk) table, one line per target."""
    lines = [
        "| target | ops/s | p50 ms | p99 ms | errors | CPU ms/op | vs reference | vs ceiling "
        "| target met | load before |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for row in rows:
        timed = row.timed
        results = (row.timed, row.warmup, row.open_loop.load if row.open_loop else None)
        errors = sum(result.error_count for result in results if result)
        if row.problems and not errors:
            errors = len(row.problems)
        cells = [
            row.target,
            f"{timed.ops_per_second:,.0f}" if timed else "-",
            f"{timed.latency_ms['p50']:.2f}" if timed else "-",
            f"{timed.latency_ms['p99']:.2f}" if timed else "-",
            str(errors),
            "-" if row.cpu_ms_per_op is None else f"{row.cpu_ms_per_op:.3f}",
            _ratio(row, "vs_reference"),
            _ratio(row, "vs_ceiling"),
            _row_verdict(row),
            _load_before(row),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _load_before(row: Row) -> str:
    """The 1-minute load average as the target started: beside each figure, since a
    target that starts on a busy machine measures the machine."""
    load = row.details.get("load_average_before")
    return "-" if load is None else f"{load[0]:.2f}"


def open_loop_table(rows: list[Row]) -> str:
    """The open-loop table: latency from each request's due time, at a fixed rate."""
    lines = [
        "| target | rate/s | achieved/s | p50 ms | p99 ms | p99.9 ms | max ms "
        "| service p99 ms | send lag p99 ms | CPU ms/op |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        result = row.open_loop
        if result is None:
            continue
        latency = result.load.latency_ms
        cells = [
            row.target,
            f"{result.rate:,.0f}",
            f"{result.achieved_rate:,.0f}",
            *(f"{latency.get(key, 0.0):.2f}" for key in ("p50", "p99", "p99.9", "max")),
            f"{result.service_ms.get('p99', 0.0):.2f}",
            f"{result.send_lag_ms.get('p99', 0.0):.2f}",
            "-" if row.open_cpu_ms_per_op is None else f"{row.open_cpu_ms_per_op:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
