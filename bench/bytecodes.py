"""Counting the Python bytecodes a measured stretch of code executes, per function.

A count is the same on every run and every machine, whatever else runs beside it: a
change of a few bytecodes a call shows where timings, which move by 2-5% between
runs, cannot (``bench cpu-per-call --bytecodes``).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any, Protocol


class Recorder(Protocol):
    """What watches the measured calls: a ``cProfile.Profile`` or a :class:`BytecodeCounter`."""

    def enable(self) -> None: ...

    def disable(self) -> None: ...


class BytecodeCounter:
    """Counts the bytecodes each Python function executes while enabled (``sys.settrace``
    with opcode events, on the thread that enables it: the event loop's)."""

    def __init__(self) -> None:
        #: Bytecodes executed and calls made, by ``file:function``.
        self.bytecodes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        name = f"{Path(code.co_filename).name}:{code.co_qualname}"
        if event == "opcode":
            self.bytecodes[name] += 1
        elif event == "call":
            frame.f_trace_opcodes = True
            self.calls[name] += 1
        return self._trace

    def enable(self) -> None:
        sys.settrace(self._trace)

    def disable(self) -> None:
        sys.settrace(None)

    def report(self, calls: int, top: int) -> list[str]:
        """The total and the ``top`` functions, per measured call."""
        lines = [f"{sum(self.bytecodes.values()) / calls:,.0f} bytecodes a call"]
        for name, count in self.bytecodes.most_common(top):
            lines.append(f"{count / calls:8.1f} {self.calls[name] / calls:6.2f}x  {name}")
        return lines
