"""Which processes are still running, and how much CPU one has used, read from /proc
(Linux), for orphan checks and for moments taken by CPU time rather than the clock."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    return text[text.rindex(")") + 2 :].split()


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (exited, waiting to be reaped)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used, user and system, in seconds."""
    fields = _stat(pid)
    assert fields is not None, f"process {pid} is gone"
    # utime and stime: fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> set[int]:
    """Every running process below ``pid``: its children, theirs, and so on."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def still_running(pids: list[int], timeout: float = 30.0) -> list[int]:
    """Those of ``pids`` still running once ``timeout`` has passed (at once if none).

    A process that has closed its files is already exiting but can take a moment to
    leave the process table; this waits for that, and only bounds a broken build.
    """
    deadline = time.monotonic() + timeout
    while (left := [pid for pid in pids if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left
