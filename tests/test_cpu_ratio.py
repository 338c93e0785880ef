"""The memory backend's whole call path stays within 2.5x the ceiling's CPU per call.

Both are measured in this process, alternately, by ``bench cpu-per-call`` (uvicorn's
protocol under the HTTP guard on an in-memory transport, the realistic mix): a ratio
of CPU times taken side by side, which a busy machine moves far less than either
figure. The layers in front of the backends (auth, tenants, metrics, the observer,
dispatch, the contract checks) once grew by 55 us a call unnoticed; this fails when
they grow again.
"""

from __future__ import annotations

import pytest

from bench.cpu_per_call import interleaved

#: The most the memory path may cost, in multiples of the ceiling's CPU per call.
MAX_RATIO = 2.5
CALLS = 4000
ROUNDS = 3


@pytest.mark.slow
def test_the_memory_path_costs_at_most_two_and_a_half_ceilings() -> None:
    results = interleaved(("memory", "ceiling"), CALLS, ROUNDS)
    assert not [r for rounds in results.values() for r in rounds if r.failed]
    # The best round of each: interruptions only ever add time.
    memory = min(r.cpu_us_per_call for r in results["memory"])
    ceiling = min(r.cpu_us_per_call for r in results["ceiling"])
    assert memory / ceiling <= MAX_RATIO, (
        f"memory {memory:.1f} us CPU per call is {memory / ceiling:.2f}x the ceiling's "
        f"{ceiling:.1f} us (at most {MAX_RATIO}x): profile with "
        "python -m bench cpu-per-call --profile tottime"
    )
