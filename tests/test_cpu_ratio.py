"""The memory backend's whole call path stays within 2.5x the ceiling's CPU per call.

Both are measured alternately in one fresh process by ``bench cpu-per-call`` (uvicorn's
protocol under the HTTP guard on an in-memory transport, the realistic mix): a ratio
of CPU times taken side by side, which a busy machine moves far less than either
figure. A process of its own, because the suite's grown heap makes every collection
of the garbage collector slower, and the memory path allocates more than the
ceiling. The layers in front of the backends (auth, tenants, metrics, the observer,
dispatch, the contract checks) once grew by 55 us a call unnoticed; this fails when
they grow again.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

#: The most the memory path may cost, in multiples of the ceiling's CPU per call.
MAX_RATIO = 2.5
#: Nine rounds of each, alternated; the ratio is the median of the nine rounds' own
#: ratios (memory's round over the ceiling's next to it). On 2-CPU VMs a round's CPU
#: time moves by up to 1.7x between rounds, and a machine's speed drifts by a third over
#: an hour: the best round of each, taken apart, gave 1.9x to 2.8x at one commit on one
#: machine, where the median of the paired ratios gave 1.99x, 2.00x and 2.01x.
CALLS = 4000
ROUNDS = 9
ROOT = Path(__file__).resolve().parent.parent
MEASURE = f"""
import json
from bench.cpu_per_call import interleaved
results = interleaved(("memory", "ceiling"), {CALLS}, {ROUNDS})
print(json.dumps({{
    target: [[r.cpu_us_per_call, r.failed] for r in rounds]
    for target, rounds in results.items()
}}))
"""


@pytest.mark.slow
def test_the_memory_path_costs_at_most_two_and_a_half_ceilings() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", MEASURE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    results = json.loads(completed.stdout.splitlines()[-1])
    assert not [failed for rounds in results.values() for _, failed in rounds if failed]
    # Each round's ratio to the round beside it, which the same moment of the machine
    # moved alike; their median, which one interrupted round cannot move.
    memory = [cpu for cpu, _ in results["memory"]]
    ceiling = [cpu for cpu, _ in results["ceiling"]]
    ratio = statistics.median(m / c for m, c in zip(memory, ceiling, strict=True))
    assert ratio <= MAX_RATIO, (
        f"memory's CPU per call is {ratio:.2f}x the ceiling's (median of {ROUNDS} rounds: "
        f"memory {statistics.median(memory):.1f} us, ceiling {statistics.median(ceiling):.1f}"
        f" us; at most {MAX_RATIO}x): profile with "
        "python -m bench cpu-per-call --profile tottime"
    )
