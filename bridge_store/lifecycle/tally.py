"""What moving history did, per substore: counts of each outcome and bytes written."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from bridge_store.backend.substores import SUBSTORE_NAMES, SubstoreName

#: Differences kept for the report; the rest are only counted, so a copy onto a store
#: that differs everywhere does not grow a list as long as the store.
MAX_REPORTED = 50


class Outcome(enum.StrEnum):
    CREATED = "created"
    #: Already there, identical: skipped.
    SAME = "same"
    #: Already there and different: left alone and reported (without ``overwrite``).
    DIFFERENT = "different"
    #: Already there and different: replaced (``overwrite``).
    REPLACED = "replaced"
    #: Gone from the source between being listed and being read: nothing to copy.
    VANISHED = "vanished"


@dataclass
class Tally:
    counts: dict[SubstoreName, Counter[Outcome]] = field(
        default_factory=lambda: {name: Counter() for name in SUBSTORE_NAMES}
    )
    #: Bytes of the items seen (documents as JSON, blobs as stored), per substore.
    sizes: dict[SubstoreName, int] = field(default_factory=lambda: dict.fromkeys(SUBSTORE_NAMES, 0))
    differences: list[str] = field(default_factory=list)
    #: Items reported as different (``differences`` lists the first few).
    different_total: int = 0

    def add(self, substore: SubstoreName, outcome: Outcome, count: int = 1) -> None:
        if count:
            self.counts[substore][outcome] += count

    def differ(self, what: str) -> None:
        """Report one item left alone (or replaced) because it differs."""
        self.different_total += 1
        if len(self.differences) < MAX_REPORTED:
            self.differences.append(what)

    def items(self, substore: SubstoreName) -> int:
        return sum(self.counts[substore].values())

    def total(self, outcome: Outcome) -> int:
        return sum(counts[outcome] for counts in self.counts.values())

    def summary(self) -> str:
        """One line: per substore, the items seen and what became of them."""
        parts = []
        for name in SUBSTORE_NAMES:
            counts = self.counts[name]
            detail = ", ".join(f"{counts[o]} {o.value}" for o in Outcome if counts[o])
            parts.append(f"{name} {self.items(name)}" + (f" ({detail})" if detail else ""))
        return "; ".join(parts)
