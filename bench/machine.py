"""What a bench's figures depend on: the machine, the versions, the commit.

Recorded with every result, since the figures come from a shared, noisy machine.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from . import servers
from .loadgen import wrk_version


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process (all its threads) and its children (the workers of
    ``serve --workers``) have used so far."""
    fields = _stat(pid)
    if fields is None:
        raise ProcessLookupError(pid)
    ticks = int(fields[11]) + int(fields[12])
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (child := _stat(int(entry))) is not None and child[1] == str(pid):
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    completed = subprocess.run(
        ["git", *args], cwd=servers.ROOT, capture_output=True, text=True, check=False
    )
    return completed.stdout.strip() if completed.returncode == 0 else None


def machine() -> dict[str, Any]:
    """What the numbers depend on: this is a shared, noisy machine."""
    cpu = None
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            name: _version(name)
            for name in (
                "bridge-store",
                "uvicorn",
                "starlette",
                "httptools",
                "uvloop",
                "cursor-sdk",
                "asyncpg",
                "redis",
                "obstore",
                "moto",
            )
        },
        "wrk": wrk_version(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "bridge_store", "backends")),
    }


def settle(
    below: float,
    limit_s: float = 180.0,
    *,
    load: Callable[[], float] = lambda: os.getloadavg()[0],
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 5.0,
) -> tuple[float, float]:
    """Wait until the 1-minute load average is under ``below`` (at most ``limit_s``).

    A benchmark run keeps both CPUs busy, so the next target would start at a load of
    about 2 however quiet the machine is: the average falls by half in about 42 s
    once the machine is idle. Returns (seconds waited, the load average then); the
    caller records both, so a figure that started above ``below`` says so.
    """
    waited = 0.0
    current = load()
    while current >= below and waited < limit_s:
        step = min(poll_s, limit_s - waited)
        sleep(step)
        waited += step
        current = load()
    return waited, current
