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
import subprocess
import sys
from pathlib import Path

import pytest

#: The most the memory path may cost, in multiples of the ceiling's CPU per call.
MAX_RATIO = 2.5
#: Many short rounds, the best of each target kept: on a 2-CPU VM a round's CPU time
#: moves by up to 1.7x from one round to the next (with 0 steal in /proc/stat), and three rounds
#: of 6,000 calls gave ratios from 2.2 to 3.4 at one commit; the best of nine rounds of
#: 4,000 gave 2.28-2.42 over four runs.
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
    # The best round of each: interruptions only ever add time.
    memory = min(cpu for cpu, _ in results["memory"])
    ceiling = min(cpu for cpu, _ in results["ceiling"])
    assert memory / ceiling <= MAX_RATIO, (
        f"memory {memory:.1f} us CPU per call is {memory / ceiling:.2f}x the ceiling's "
        f"{ceiling:.1f} us (at most {MAX_RATIO}x): profile with "
        "python -m bench cpu-per-call --profile tottime"
    )
